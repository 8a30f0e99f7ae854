package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

func TestThreeRequestClaimIsAtomic(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("cpu", "memory", "instances")
	f.Grant("g", map[string][]quotatest.Bucket{"cpu": {{Amount: 10}}, "memory": {{Amount: 10}}, "instances": {{Amount: 1}}})

	f.Claim("first", quotatest.R("cpu", 4), quotatest.R("memory", 4), quotatest.R("instances", 1))
	if c := f.Decided("first"); c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ClaimReasonQuotaAvailable {
		t.Fatalf("first claim: %+v", c)
	}
	// The second fits cpu and memory but not instances: denied as a whole.
	f.Claim("second", quotatest.R("cpu", 4), quotatest.R("memory", 4), quotatest.R("instances", 1))
	c := f.Decided("second")
	if c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ClaimReasonQuotaExceeded {
		t.Fatalf("second claim: %+v", c)
	}
	for _, want := range []string{"requested 1 unit of " + string(f.RT("instances")), "only 0 of the limit 1 is available", "ResourceGrant for Organization.resourcemanager.miloapis.com " + f.Org.Name} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("denial message %q lacks %q", c.Message, want)
		}
	}
	var reasons []string
	for _, a := range f.GetClaim("second").Status.Allocations {
		reasons = append(reasons, string(a.Status)+"/"+a.Reason)
		if a.AllocatedAmount != 0 {
			t.Errorf("denied request %s holds %d", a.ResourceType, a.AllocatedAmount)
		}
	}
	if diff := cmp.Diff([]string{"Denied/ClaimDenied", "Denied/ClaimDenied", "Denied/QuotaExceeded"}, reasons); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	// The denied claim holds nothing anywhere.
	f.WaitBucket(quotatest.N(10, 4, 6), "cpu")
	f.WaitBucket(quotatest.N(10, 4, 6), "memory")
	f.WaitBucket(quotatest.N(1, 1, 0), "instances")
}

func TestDimensionsNestedLimits(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("instances")
	dfw := []quotav1alpha1.Dimension{{Key: "networking.datumapis.com/location", Value: "dfw"}}
	iad := []quotav1alpha1.Dimension{{Key: "networking.datumapis.com/location", Value: "iad"}}
	// 20 instances overall, 5 in dfw.
	f.Grant("g", map[string][]quotatest.Bucket{"instances": {{Amount: 20}, {Amount: 5, Dims: dfw}}})
	for i := range 6 {
		name := "dfw-" + string(rune('a'+i))
		f.Claim(name, quotatest.R("instances", 1, dfw...))
		want := metav1.ConditionTrue
		if i == 5 {
			want = metav1.ConditionFalse
		}
		if c := f.Decided(name); c.Status != want {
			t.Fatalf("%s: %+v", name, c)
		}
	}
	f.Claim("iad-big", quotatest.R("instances", 15, iad...))
	if c := f.Decided("iad-big"); c.Status != metav1.ConditionTrue {
		t.Fatalf("iad-big: %+v", c)
	}
	f.Claim("iad-one-more", quotatest.R("instances", 1, iad...))
	if c := f.Decided("iad-one-more"); c.Status != metav1.ConditionFalse {
		t.Fatalf("overall limit of 20 not enforced: %+v", c)
	}
	f.WaitBucket(quotatest.N(5, 5, 0), "instances", dfw...)
	b := f.WaitBucket(quotatest.N(20, 20, 0), "instances")
	if b.Labels["quota.miloapis.com/consumer-name"] != f.Org.Name || b.Labels["quota.miloapis.com/consumer-kind"] != "Organization" {
		t.Errorf("bucket labels %v", b.Labels)
	}
}

func TestDeletingAGrantedClaimReleasesIt(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: 2}}})
	f.Claim("a", quotatest.R("projects", 2))
	f.Decided("a")
	f.WaitBucket(quotatest.N(2, 2, 0), "projects")
	if err := f.C.Delete(context.Background(), f.GetClaim("a")); err != nil {
		t.Fatal(err)
	}
	f.WaitBucket(quotatest.N(2, 0, 2), "projects")
	f.Claim("b", quotatest.R("projects", 2))
	if c := f.Decided("b"); c.Status != metav1.ConditionTrue {
		t.Fatalf("b after release: %+v", c)
	}
}

func TestLoweredLimitRevokesNothing(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	g := f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: 5}}})
	f.Claim("a", quotatest.R("projects", 4))
	f.Decided("a")
	f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 2 })
	b := f.WaitBucket(quotatest.N(2, 4, 0), "projects")
	f.WaitCondition(b, quotav1alpha1.BucketConditionOverLimit, metav1.ConditionTrue)
	if c := f.Decided("a"); c.Status != metav1.ConditionTrue {
		t.Fatalf("a lowered limit revoked a granted claim: %+v", c)
	}
	f.Claim("b", quotatest.R("projects", 1))
	if c := f.Decided("b"); c.Status != metav1.ConditionFalse {
		t.Fatalf("a claim over a lowered limit: %+v", c)
	}
}

func TestWaitingClaimGrantedWhenGrantArrives(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	f.Claim("early", quotatest.R("projects", 3))
	f.Claim("later", quotatest.R("projects", 3))
	if c := f.Decided("early"); c.Reason != quotav1alpha1.ClaimReasonQuotaExceeded {
		t.Fatalf("without a grant: %+v", c)
	}
	f.WaitBucket(quotatest.N(0, 0, 0), "projects") // the bucket exists as soon as a claim refers to it
	f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: 4}}})
	// Creation order: the earlier claim gets the room.
	f.WaitBucket(quotatest.N(4, 3, 1), "projects")
	if c := f.DecidedAs("early", metav1.ConditionTrue); c.Reason != quotav1alpha1.ClaimReasonQuotaAvailable {
		t.Fatalf("early after the grant: %+v", c)
	}
	if c := f.Decided("later"); c.Status != metav1.ConditionFalse {
		t.Fatalf("later after the grant: %+v", c)
	}
}

func TestValidationFailures(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: 10}}})
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
			c := f.ClaimObject(tc.name, quotatest.R("projects", 1))
			tc.mutate(c)
			if err := f.C.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			got := f.Decided(tc.name)
			if got.Status != metav1.ConditionFalse || got.Reason != quotav1alpha1.ClaimReasonValidationFailed || !strings.Contains(got.Message, tc.want) {
				t.Errorf("got %s/%s %q, want ValidationFailed saying %q", got.Status, got.Reason, got.Message, tc.want)
			}
		})
	}
}

func TestGrantAndRegistrationConditions(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	g := f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: 1}}})
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)

	bad := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p"},
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: f.RT("projects"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 1}}}},
	}}
	if err := f.C.Create(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if c := f.WaitCondition(bad, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse); c.Reason != quotav1alpha1.GrantReasonValidationFailed || !strings.Contains(c.Message, "cannot receive") {
		t.Errorf("bad grant: %+v", c)
	}

	// Deleting the registration flags the grant.
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := f.C.Get(context.Background(), types.NamespacedName{Name: f.ID + "-projects"}, reg); err != nil {
		t.Fatal(err)
	}
	if err := f.C.Delete(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	if c := f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse); c.Reason != quotav1alpha1.GrantReasonValidationFailed || !strings.Contains(c.Message, "not registered") {
		t.Errorf("grant after its registration was deleted: %+v", c)
	}
}

func TestDuplicateRegistrationRefusedAtCreate(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	dup := &quotav1alpha1.ResourceRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-duplicate"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType:      quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization"},
			Type:              quotav1alpha1.RegistrationTypeEntity,
			ResourceType:      f.RT("projects"),
			BaseUnit:          "project",
			ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: "resourcemanager.miloapis.com", Kind: "Project"}},
		},
	}
	err := f.C.Create(context.Background(), dup)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.resourceType") || !strings.Contains(err.Error(), `already registered by ResourceRegistration "`+f.ID+`-projects"`) {
		t.Fatalf("a duplicate registration: got %v, want a field error naming the existing registration", err)
	}
	// The first registration stays Active.
	first := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-projects"}}
	f.WaitCondition(first, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
}

func TestMetricsServed(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: 1}}})
	f.Claim("m", quotatest.R("projects", 1))
	f.Decided("m")
	kc := kubernetes.NewForConfigOrDie(srv.Config)
	body, err := kc.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"milo_quota_claim_decisions_total", "milo_quota_claim_decision_duration_seconds", "milo_quota_claims_pending", "milo_quota_buckets", "milo_quota_engine_leader 1"} {
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}
