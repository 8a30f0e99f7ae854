package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

var scheme = runtime.NewScheme()

func init() {
	_ = quotav1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
}

func newClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var counter atomic.Int64

// fixture is one test's world: its own resource types, consumer and namespace,
// so that tests sharing the server never see each other's quota.
type fixture struct {
	t        testing.TB
	c        client.Client
	id       string
	org      quotav1alpha1.ConsumerRef
	ns       string
	bucketNS string
}

func newFixture(t testing.TB, c client.Client) *fixture {
	t.Helper()
	id := fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1_000_000, counter.Add(1))
	f := &fixture{t: t, c: c, id: id,
		org: quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "org-" + id},
		ns:  "claims-" + id}
	f.bucketNS = "organization-" + f.org.Name
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// rt is a resource type unique to this fixture.
func (f *fixture) rt(name string) quotav1alpha1.ResourceType {
	return quotav1alpha1.ResourceType(fmt.Sprintf("%s.example.com/%s", f.id, name))
}

func (f *fixture) register(names ...string) {
	f.t.Helper()
	for _, n := range names {
		r := &quotav1alpha1.ResourceRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: f.id + "-" + n},
			Spec: quotav1alpha1.ResourceRegistrationSpec{
				ConsumerType:      quotav1alpha1.ConsumerTypeRef{APIGroup: quota.OrganizationGroup, Kind: "Organization"},
				Type:              quotav1alpha1.RegistrationTypeAllocation,
				ResourceType:      f.rt(n),
				BaseUnit:          "unit",
				ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: quota.OrganizationGroup, Kind: "Project"}},
			},
		}
		if err := f.c.Create(context.Background(), r); err != nil {
			f.t.Fatal(err)
		}
		f.waitCondition(r, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	}
}

type bucketSpec struct {
	amount int64
	dims   []quotav1alpha1.Dimension
}

func (f *fixture) grant(name string, allowances map[string][]bucketSpec) *quotav1alpha1.ResourceGrant {
	f.t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: f.org}}
	for rt, buckets := range allowances {
		a := quotav1alpha1.Allowance{ResourceType: f.rt(rt)}
		for _, b := range buckets {
			a.Buckets = append(a.Buckets, quotav1alpha1.GrantBucket{Amount: b.amount, Dimensions: b.dims})
		}
		g.Spec.Allowances = append(g.Spec.Allowances, a)
	}
	if err := f.c.Create(context.Background(), g); err != nil {
		f.t.Fatal(err)
	}
	return g
}

type req struct {
	rt     string
	amount int64
	dims   []quotav1alpha1.Dimension
}

func (f *fixture) claimObject(name string, reqs ...req) *quotav1alpha1.ResourceClaim {
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: f.org}}
	for _, r := range reqs {
		c.Spec.Requests = append(c.Spec.Requests, quotav1alpha1.ResourceRequest{ResourceType: f.rt(r.rt), Amount: r.amount, Dimensions: r.dims})
	}
	return c
}

func (f *fixture) claim(name string, reqs ...req) *quotav1alpha1.ResourceClaim {
	f.t.Helper()
	c := f.claimObject(name, reqs...)
	if err := f.c.Create(context.Background(), c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

// decided waits until the claim has a decision and returns its Granted condition.
func (f *fixture) decided(name string) metav1.Condition {
	f.t.Helper()
	var cond metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c := &quotav1alpha1.ResourceClaim{}
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, c); err != nil {
			return false, nil
		}
		got := meta.FindStatusCondition(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
		if got == nil || got.Status == metav1.ConditionUnknown {
			return false, nil
		}
		cond = *got
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("claim %s was not decided: %v", name, err)
	}
	return cond
}

func (f *fixture) getClaim(name string) *quotav1alpha1.ResourceClaim {
	f.t.Helper()
	c := &quotav1alpha1.ResourceClaim{}
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, c); err != nil {
		f.t.Fatal(err)
	}
	return c
}

type nums struct{ Limit, Allocated, Available int64 }

func (f *fixture) bucketName(rt string, dims ...quotav1alpha1.Dimension) string {
	var d []quota.Dim
	for _, p := range dims {
		d = append(d, quota.Dim{Key: p.Key, Value: p.Value})
	}
	return quota.BucketName(quota.BucketID{
		Consumer:     quota.ConsumerID{APIGroup: f.org.APIGroup, Kind: f.org.Kind, Name: f.org.Name},
		ResourceType: string(f.rt(rt)), Dims: quota.NewDimensions(d...).Key()})
}

// waitBucket waits until the bucket shows want.
func (f *fixture) waitBucket(want nums, rt string, dims ...quotav1alpha1.Dimension) *quotav1alpha1.AllowanceBucket {
	f.t.Helper()
	name := f.bucketName(rt, dims...)
	b := &quotav1alpha1.AllowanceBucket{}
	var last nums
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: f.bucketNS, Name: name}, b); err != nil {
			return false, nil
		}
		last = nums{b.Status.Limit, b.Status.Allocated, b.Status.Available}
		return last == want, nil
	})
	if err != nil {
		f.t.Fatalf("bucket %s/%s shows %+v, want %+v", f.bucketNS, name, last, want)
	}
	return b
}

// waitCondition waits for a condition status on any quota object.
func (f *fixture) waitCondition(obj client.Object, condType string, status metav1.ConditionStatus) metav1.Condition {
	f.t.Helper()
	var cond metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *quotav1alpha1.ResourceRegistration:
			conds = o.Status.Conditions
		case *quotav1alpha1.ResourceGrant:
			conds = o.Status.Conditions
		case *quotav1alpha1.AllowanceBucket:
			conds = o.Status.Conditions
		}
		c := meta.FindStatusCondition(conds, condType)
		if c == nil || c.Status != status {
			return false, nil
		}
		cond = *c
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("%s never had %s=%s", obj.GetName(), condType, status)
	}
	return cond
}

// updateGrant changes a grant, retrying on conflicts with status writes.
func (f *fixture) updateGrant(g *quotav1alpha1.ResourceGrant, change func(*quotav1alpha1.ResourceGrant)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(g), g); err != nil {
			return err
		}
		change(g)
		return f.c.Update(context.Background(), g)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}
