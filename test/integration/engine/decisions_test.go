package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func TestThreeRequestClaimIsAtomic(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("cpu", "memory", "instances")
	f.grant("g", map[string][]bucketSpec{"cpu": {{amount: 10}}, "memory": {{amount: 10}}, "instances": {{amount: 1}}})

	f.claim("first", req{"cpu", 4, nil}, req{"memory", 4, nil}, req{"instances", 1, nil})
	if c := f.decided("first"); c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ClaimReasonQuotaAvailable {
		t.Fatalf("first claim: %+v", c)
	}
	// The second fits cpu and memory but not instances: denied as a whole.
	f.claim("second", req{"cpu", 4, nil}, req{"memory", 4, nil}, req{"instances", 1, nil})
	c := f.decided("second")
	if c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ClaimReasonQuotaExceeded {
		t.Fatalf("second claim: %+v", c)
	}
	for _, want := range []string{"requested 1 unit of " + string(f.rt("instances")), "only 0 of the limit 1 is available", "ResourceGrant for Organization.resourcemanager.miloapis.com " + f.org.Name} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("denial message %q lacks %q", c.Message, want)
		}
	}
	var reasons []string
	for _, a := range f.getClaim("second").Status.Allocations {
		reasons = append(reasons, string(a.Status)+"/"+a.Reason)
		if a.AllocatedAmount != 0 {
			t.Errorf("denied request %s holds %d", a.ResourceType, a.AllocatedAmount)
		}
	}
	if diff := cmp.Diff([]string{"Denied/ClaimDenied", "Denied/ClaimDenied", "Denied/QuotaExceeded"}, reasons); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	// The denied claim holds nothing anywhere.
	f.waitBucket(nums{10, 4, 6}, "cpu")
	f.waitBucket(nums{10, 4, 6}, "memory")
	f.waitBucket(nums{1, 1, 0}, "instances")
}

func TestDimensionsNestedLimits(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("instances")
	dfw := []quotav1alpha1.Dimension{{Key: "networking.datumapis.com/location", Value: "dfw"}}
	iad := []quotav1alpha1.Dimension{{Key: "networking.datumapis.com/location", Value: "iad"}}
	// 20 instances overall, 5 in dfw.
	f.grant("g", map[string][]bucketSpec{"instances": {{amount: 20}, {amount: 5, dims: dfw}}})
	for i := range 6 {
		name := "dfw-" + string(rune('a'+i))
		f.claim(name, req{"instances", 1, dfw})
		want := metav1.ConditionTrue
		if i == 5 {
			want = metav1.ConditionFalse
		}
		if c := f.decided(name); c.Status != want {
			t.Fatalf("%s: %+v", name, c)
		}
	}
	f.claim("iad-big", req{"instances", 15, iad})
	if c := f.decided("iad-big"); c.Status != metav1.ConditionTrue {
		t.Fatalf("iad-big: %+v", c)
	}
	f.claim("iad-one-more", req{"instances", 1, iad})
	if c := f.decided("iad-one-more"); c.Status != metav1.ConditionFalse {
		t.Fatalf("overall limit of 20 not enforced: %+v", c)
	}
	f.waitBucket(nums{5, 5, 0}, "instances", dfw...)
	b := f.waitBucket(nums{20, 20, 0}, "instances")
	if b.Labels["quota.miloapis.com/consumer-name"] != f.org.Name || b.Labels["quota.miloapis.com/consumer-kind"] != "Organization" {
		t.Errorf("bucket labels %v", b.Labels)
	}
}

func TestDeletingAGrantedClaimReleasesIt(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("projects")
	f.grant("g", map[string][]bucketSpec{"projects": {{amount: 2}}})
	f.claim("a", req{"projects", 2, nil})
	f.decided("a")
	f.waitBucket(nums{2, 2, 0}, "projects")
	if err := f.c.Delete(context.Background(), f.getClaim("a")); err != nil {
		t.Fatal(err)
	}
	f.waitBucket(nums{2, 0, 2}, "projects")
	f.claim("b", req{"projects", 2, nil})
	if c := f.decided("b"); c.Status != metav1.ConditionTrue {
		t.Fatalf("b after release: %+v", c)
	}
}

func TestLoweredLimitRevokesNothing(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("projects")
	g := f.grant("g", map[string][]bucketSpec{"projects": {{amount: 5}}})
	f.claim("a", req{"projects", 4, nil})
	f.decided("a")
	f.updateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 2 })
	b := f.waitBucket(nums{2, 4, 0}, "projects")
	f.waitCondition(b, quotav1alpha1.BucketConditionOverLimit, metav1.ConditionTrue)
	if c := f.decided("a"); c.Status != metav1.ConditionTrue {
		t.Fatalf("a lowered limit revoked a granted claim: %+v", c)
	}
	f.claim("b", req{"projects", 1, nil})
	if c := f.decided("b"); c.Status != metav1.ConditionFalse {
		t.Fatalf("a claim over a lowered limit: %+v", c)
	}
}

func TestWaitingClaimGrantedWhenGrantArrives(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("projects")
	f.claim("early", req{"projects", 3, nil})
	f.claim("later", req{"projects", 3, nil})
	if c := f.decided("early"); c.Reason != quotav1alpha1.ClaimReasonQuotaExceeded {
		t.Fatalf("without a grant: %+v", c)
	}
	f.waitBucket(nums{0, 0, 0}, "projects") // the bucket exists as soon as a claim refers to it
	f.grant("g", map[string][]bucketSpec{"projects": {{amount: 4}}})
	// Creation order: the earlier claim gets the room.
	f.waitBucket(nums{4, 3, 1}, "projects")
	if c := f.decided("early"); c.Status != metav1.ConditionTrue {
		t.Fatalf("early after the grant: %+v", c)
	}
	if c := f.decided("later"); c.Status != metav1.ConditionFalse {
		t.Fatalf("later after the grant: %+v", c)
	}
}

func TestValidationFailures(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("projects")
	f.grant("g", map[string][]bucketSpec{"projects": {{amount: 10}}})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		mutate func(*quotav1alpha1.ResourceClaim)
		want   string
	}{
		{"unregistered", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests[0].ResourceType = "nobody.example.com/things" }, "is not registered"},
		{"consumer-mismatch", func(c *quotav1alpha1.ResourceClaim) { c.Spec.ConsumerRef.Kind = "Project" }, "charges Organization.resourcemanager.miloapis.com consumers"},
		{"resource-ref-kind", func(c *quotav1alpha1.ResourceClaim) {
			c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{Kind: "Secret", Name: "s"}
		}, "Secret objects may not claim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.claimObject(tc.name, req{"projects", 1, nil})
			tc.mutate(c)
			if err := f.c.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			got := f.decided(tc.name)
			if got.Status != metav1.ConditionFalse || got.Reason != quotav1alpha1.ClaimReasonValidationFailed || !strings.Contains(got.Message, tc.want) {
				t.Errorf("got %s/%s %q, want ValidationFailed saying %q", got.Status, got.Reason, got.Message, tc.want)
			}
		})
	}
}

func TestGrantAndRegistrationConditions(t *testing.T) {
	f := newFixture(t, newClient(t, srv.Config))
	f.register("projects")
	g := f.grant("g", map[string][]bucketSpec{"projects": {{amount: 1}}})
	f.waitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)

	bad := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: f.ns}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p"},
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: f.rt("projects"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 1}}}},
	}}
	if err := f.c.Create(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if c := f.waitCondition(bad, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse); c.Reason != "ConsumerTypeMismatch" {
		t.Errorf("bad grant: %+v", c)
	}

	// Deleting the registration flags the grant.
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := f.c.Get(context.Background(), types.NamespacedName{Name: f.id + "-projects"}, reg); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Delete(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	if c := f.waitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse); c.Reason != "ResourceTypeNotRegistered" {
		t.Errorf("grant after its registration was deleted: %+v", c)
	}
}
