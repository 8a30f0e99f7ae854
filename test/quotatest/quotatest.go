package quotatest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	resourcemanagerv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/delegation"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Scheme holds the quota, tenancy and core kinds.
var Scheme = runtime.NewScheme()

func init() {
	_ = quotav1alpha1.AddToScheme(Scheme)
	_ = resourcemanagerv1alpha1.AddToScheme(Scheme)
	_ = corev1.AddToScheme(Scheme)
	_ = rbacv1.AddToScheme(Scheme)
}

// Client is a controller-runtime client that remembers its configuration
// (for the waits that send their own requests).
type Client struct {
	client.Client
	config *rest.Config
}

func NewClient(t testing.TB, cfg *rest.Config) *Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &Client{Client: c, config: rest.CopyConfig(cfg)}
}

// WaitPolicyInForce waits until admission enforces generation of the
// policy named policy: a server-side dry run of creating obj (an object of
// the policy's trigger kind, resource gvr) answers with the warning
// admission gives for a dry run it would charge, naming that policy and
// generation. Nothing is created or consumed.
func (f *Fixture) WaitPolicyInForce(gvr schema.GroupVersionResource, obj client.Object, policy string, generation int64) {
	f.T.Helper()
	f.waitAdmission(gvr, obj, fmt.Sprintf("ClaimCreationPolicy %s (generation %d) would charge", policy, generation), true)
}

// WaitPolicyNotInForce waits until a dry run of creating obj is admitted
// without admission naming policy: it does not charge that kind any more.
func (f *Fixture) WaitPolicyNotInForce(gvr schema.GroupVersionResource, obj client.Object, policy string) {
	f.T.Helper()
	f.waitAdmission(gvr, obj, "ClaimCreationPolicy "+policy+" ", false)
}

func (f *Fixture) waitAdmission(gvr schema.GroupVersionResource, obj client.Object, warningText string, want bool) {
	f.T.Helper()
	c, ok := f.C.(*Client)
	if !ok {
		f.T.Fatal("waiting on admission needs a fixture whose client NewClient made")
	}
	cfg := rest.CopyConfig(c.config)
	warned := &Warnings{}
	cfg.WarningHandler = warned
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		f.T.Fatal(err)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		f.T.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	if u.GetAPIVersion() == "" {
		gvks, _, err := Scheme.ObjectKinds(obj)
		if err != nil {
			f.T.Fatal(err)
		}
		u.SetGroupVersionKind(gvks[0])
	}
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		warned.Reset()
		_, last = dyn.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil && warned.Contains(warningText) == want, nil
	})
	if err != nil {
		f.T.Fatalf("admission still answers a dry run of %s %s/%s with error %v and warnings %q after 30s; waited for %q present=%v",
			gvr.Resource, obj.GetNamespace(), obj.GetName(), last, warned.All(), warningText, want)
	}
}

// Warnings collects the warnings a server sends a client (set it as the
// client's rest.Config.WarningHandler).
type Warnings struct {
	mu  sync.Mutex
	got []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

// Reset forgets the warnings seen.
func (w *Warnings) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = nil
}

// Contains reports whether a warning contains s.
func (w *Warnings) Contains(s string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range w.got {
		if strings.Contains(g, s) {
			return true
		}
	}
	return false
}

// All are the warnings seen.
func (w *Warnings) All() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// String is the warnings seen, one a line.
func (w *Warnings) String() string {
	return strings.Join(w.All(), "\n")
}

// Fixture is one test's world: its own resource types, consumer and namespace,
// so that tests sharing the server never see each other's quota.
type Fixture struct {
	T        testing.TB
	C        client.Client
	ID       string
	Org      quotav1alpha1.ConsumerRef
	NS       string
	BucketNS string
	// Limit is free for tests to remember the limit they granted.
	Limit int64
}

func NewFixture(t testing.TB, c client.Client) *Fixture {
	t.Helper()
	id := fmt.Sprintf("t%d-%s", time.Now().UnixNano()%1_000_000, rand.String(5))
	f := &Fixture{T: t, C: c, ID: id,
		Org: quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "org-" + id},
		NS:  "claims-" + id}
	f.BucketNS = "organization-" + f.Org.Name
	// The engine writes buckets only into namespaces that exist: the
	// fixture's organization is a bare consumer name, with no Organization
	// (and so no tenancy controller) to create its namespace.
	// The fixture's namespace is a platform namespace: its grants may name
	// any consumer (the fixture's organization has no namespace of its own
	// to hold them).
	for _, ns := range []string{f.NS, f.BucketNS} {
		var labels map[string]string
		if ns == f.NS {
			labels = map[string]string{delegation.PlatformNamespaceLabel: "true"}
		}
		if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// RT is a resource type unique to this Fixture.
func (f *Fixture) RT(name string) quotav1alpha1.ResourceType {
	return quotav1alpha1.ResourceType(fmt.Sprintf("%s.example.com/%s", f.ID, name))
}

func (f *Fixture) Register(names ...string) {
	f.T.Helper()
	f.RegisterClaimedBy(names, quotav1alpha1.ClaimingResource{APIGroup: quota.OrganizationGroup, Kind: "Project"})
}

// RegisterClaimedBy registers resource types that objects of the given kinds may claim.
func (f *Fixture) RegisterClaimedBy(names []string, claiming ...quotav1alpha1.ClaimingResource) {
	f.T.Helper()
	for _, n := range names {
		r := &quotav1alpha1.ResourceRegistration{
			ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-" + n},
			Spec: quotav1alpha1.ResourceRegistrationSpec{
				ConsumerType:      quotav1alpha1.ConsumerTypeRef{APIGroup: quota.OrganizationGroup, Kind: "Organization"},
				Type:              quotav1alpha1.RegistrationTypeAllocation,
				ResourceType:      f.RT(n),
				BaseUnit:          "unit",
				ClaimingResources: claiming,
			},
		}
		if err := f.C.Create(context.Background(), r); err != nil {
			f.T.Fatal(err)
		}
		f.WaitCondition(r, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	}
}

// SecretsPolicy registers the fixture's resource type "secrets" (claimed by
// Secrets), grants limit of it to the fixture's organization, and creates a
// Ready ClaimCreationPolicy that charges one for each Secret created in the
// fixture's namespace.
func (f *Fixture) SecretsPolicy(limit int64) *quotav1alpha1.ClaimCreationPolicy {
	f.T.Helper()
	f.RegisterClaimedBy([]string{"secrets"}, quotav1alpha1.ClaimingResource{Kind: "Secret"})
	f.Grant("g", map[string][]Bucket{"secrets": {{Amount: limit}}})
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", f.NS)}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind, Name: f.Org.Name},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: string(f.RT("secrets")), Amount: intstr.FromInt32(1)}},
	}
	if err := f.C.Create(context.Background(), p); err != nil {
		f.T.Fatal(err)
	}
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}, p.Name, p.Generation)
	return p
}

// Bucket is a grant bucket.
type Bucket struct {
	Amount int64
	Dims   []quotav1alpha1.Dimension
}

// Grant creates a grant of the fixture's organization and waits until the
// engine counts it.
func (f *Fixture) Grant(name string, allowances map[string][]Bucket) *quotav1alpha1.ResourceGrant {
	f.T.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: f.Org}}
	for rt, buckets := range allowances {
		a := quotav1alpha1.Allowance{ResourceType: f.RT(rt)}
		for _, b := range buckets {
			a.Buckets = append(a.Buckets, quotav1alpha1.GrantBucket{Amount: b.Amount, Dimensions: b.Dims})
		}
		g.Spec.Allowances = append(g.Spec.Allowances, a)
	}
	if err := f.C.Create(context.Background(), g); err != nil {
		f.T.Fatal(err)
	}
	// Counted before anything is claimed against it: a claim the engine
	// sees before the grant is decided without it (and again once the
	// grant arrives), which is not what a test of the grant's limit means.
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	return g
}

// Req is a claim request of a fixture resource type.
type Req struct {
	RT     string
	Amount int64
	Dims   []quotav1alpha1.Dimension
}

func (f *Fixture) ClaimObject(name string, reqs ...Req) *quotav1alpha1.ResourceClaim {
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: f.Org}}
	for _, r := range reqs {
		c.Spec.Requests = append(c.Spec.Requests, quotav1alpha1.ResourceRequest{ResourceType: f.RT(r.RT), Amount: r.Amount, Dimensions: r.Dims})
	}
	return c
}

func (f *Fixture) Claim(name string, reqs ...Req) *quotav1alpha1.ResourceClaim {
	f.T.Helper()
	c := f.ClaimObject(name, reqs...)
	if err := f.C.Create(context.Background(), c); err != nil {
		f.T.Fatal(err)
	}
	return c
}

// Decided waits until the claim has a decision and returns its Granted condition.
func (f *Fixture) Decided(name string) metav1.Condition {
	f.T.Helper()
	var cond metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c := &quotav1alpha1.ResourceClaim{}
		if err := f.C.Get(ctx, types.NamespacedName{Namespace: f.NS, Name: name}, c); err != nil {
			return false, nil
		}
		got := quotav1alpha1.ClaimDecision(c.Status.Conditions)
		if got == nil {
			return false, nil
		}
		cond = *got
		return true, nil
	})
	if err != nil {
		f.T.Fatalf("claim %s was not decided: %v", name, err)
	}
	return cond
}

// DecidedAs waits until the claim's decision has the given status, for a claim
// decided again: the engine writes a claim's status and its buckets' numbers
// independently, so a bucket can show a grant a moment before its claim does.
func (f *Fixture) DecidedAs(name string, status metav1.ConditionStatus) metav1.Condition {
	f.T.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c := &quotav1alpha1.ResourceClaim{}
		if err := f.C.Get(ctx, types.NamespacedName{Namespace: f.NS, Name: name}, c); err != nil {
			return false, nil
		}
		last = quotav1alpha1.ClaimDecision(c.Status.Conditions)
		return last != nil && last.Status == status, nil
	})
	if err != nil {
		f.T.Fatalf("claim %s was not decided %s: its decision is %+v", name, status, last)
	}
	return *last
}

func (f *Fixture) GetClaim(name string) *quotav1alpha1.ResourceClaim {
	f.T.Helper()
	c := &quotav1alpha1.ResourceClaim{}
	if err := f.C.Get(context.Background(), types.NamespacedName{Namespace: f.NS, Name: name}, c); err != nil {
		f.T.Fatal(err)
	}
	return c
}

// Nums are a bucket's numbers.
type Nums struct{ Limit, Allocated, Available int64 }

func (f *Fixture) BucketName(rt string, dims ...quotav1alpha1.Dimension) string {
	var d []quota.Dim
	for _, p := range dims {
		d = append(d, quota.Dim{Key: p.Key, Value: p.Value})
	}
	return quota.BucketName(quota.BucketID{
		Consumer:     quota.ConsumerID{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind, Name: f.Org.Name},
		ResourceType: string(f.RT(rt)), Dims: quota.NewDimensions(d...).Key()})
}

// WaitBucket waits until the bucket shows want.
func (f *Fixture) WaitBucket(want Nums, rt string, dims ...quotav1alpha1.Dimension) *quotav1alpha1.AllowanceBucket {
	f.T.Helper()
	name := f.BucketName(rt, dims...)
	b := &quotav1alpha1.AllowanceBucket{}
	var last Nums
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := f.C.Get(ctx, types.NamespacedName{Namespace: f.BucketNS, Name: name}, b); err != nil {
			return false, nil
		}
		last = Nums{b.Status.Limit, b.Status.Allocated, b.Status.Available}
		return last == want, nil
	})
	if err != nil {
		f.T.Fatalf("bucket %s/%s shows %+v, want %+v", f.BucketNS, name, last, want)
	}
	return b
}

// WaitCondition waits for a condition status on any quota object.
func (f *Fixture) WaitCondition(obj client.Object, condType string, status metav1.ConditionStatus) metav1.Condition {
	f.T.Helper()
	var cond metav1.Condition
	var last []metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := f.C.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
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
		case *quotav1alpha1.ClaimCreationPolicy:
			conds = o.Status.Conditions
		case *quotav1alpha1.GrantCreationPolicy:
			conds = o.Status.Conditions
		case *resourcemanagerv1alpha1.Organization:
			conds = o.Status.Conditions
		case *resourcemanagerv1alpha1.Project:
			conds = o.Status.Conditions
		default:
			f.T.Fatalf("WaitCondition does not know the conditions of %T", obj)
		}
		last = conds
		c := meta.FindStatusCondition(conds, condType)
		if c == nil || c.Status != status {
			return false, nil
		}
		cond = *c
		return true, nil
	})
	if err != nil {
		f.T.Fatalf("%s never had %s=%s; its conditions: %+v", obj.GetName(), condType, status, last)
	}
	return cond
}

// UpdateGrant changes a grant, retrying on conflicts with status writes.
func (f *Fixture) UpdateGrant(g *quotav1alpha1.ResourceGrant, change func(*quotav1alpha1.ResourceGrant)) {
	f.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(g), g); err != nil {
			return err
		}
		change(g)
		return f.C.Update(context.Background(), g)
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// CreateConcurrently creates n claims of one unit of "projects" from
// workers goroutines. It may be called from any goroutine.
func CreateConcurrently(f *Fixture, prefix string, n, workers int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c := f.ClaimObject(fmt.Sprintf("%s-%04d", prefix, i), R("projects", 1))
				if err := f.C.Create(context.Background(), c); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// CountDecided waits until every claim in the Fixture's namespace is decided
// and returns how many are granted.
func CountDecided(t testing.TB, f *Fixture, want int, timeout time.Duration) (granted int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := f.C.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		granted = 0
		decided := 0
		for _, c := range list.Items {
			cond := quotav1alpha1.ClaimDecision(c.Status.Conditions)
			if cond == nil {
				continue
			}
			decided++
			if cond.Status == metav1.ConditionTrue {
				granted++
			}
		}
		return decided == want && len(list.Items) == want, nil
	})
	if err != nil {
		t.Fatalf("not every claim was decided: %v", err)
	}
	return granted
}

// R is a request of amount units of the fixture resource type rt.
func R(rt string, amount int64, dims ...quotav1alpha1.Dimension) Req {
	return Req{RT: rt, Amount: amount, Dims: dims}
}

// N are a bucket's limit, allocated and available.
func N(limit, allocated, available int64) Nums {
	return Nums{Limit: limit, Allocated: allocated, Available: available}
}

// WatchDecided waits, through a watch rather than repeated lists, until want
// claims in the fixture's namespace are decided, and returns how many are
// granted. Benchmarks use it so that waiting costs the server little.
func WatchDecided(t testing.TB, cfg *rest.Config, f *Fixture, want int, timeout time.Duration) (granted int) {
	t.Helper()
	if want == 0 {
		return 0
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := wc.Watch(ctx, &quotav1alpha1.ResourceClaimList{}, client.InNamespace(f.NS))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	decided := map[types.UID]bool{}
	for ev := range w.ResultChan() {
		c, ok := ev.Object.(*quotav1alpha1.ResourceClaim)
		if !ok {
			continue
		}
		cond := quotav1alpha1.ClaimDecision(c.Status.Conditions)
		if cond == nil {
			continue
		}
		decided[c.UID] = cond.Status == metav1.ConditionTrue
		if len(decided) == want {
			for _, g := range decided {
				if g {
					granted++
				}
			}
			return granted
		}
	}
	t.Fatalf("only %d of %d claims were decided within %s", len(decided), want, timeout)
	return 0
}

// FastEngineOptions are engine options with short leader election, so that
// tests fail over in seconds.
func FastEngineOptions() engine.Options {
	o := engine.DefaultOptions()
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	return o
}

// WaitPolicyReady waits for the policy's Ready condition at its generation;
// when it is True, also until admission enforces that generation, and when
// False, until admission no longer charges under it (WaitPolicyInForce,
// WaitPolicyNotInForce). probe, when given, is the object whose create is
// dry-run; by default an object of the trigger kind in the fixture's
// namespace.
func (f *Fixture) WaitPolicyReady(p *quotav1alpha1.ClaimCreationPolicy, status metav1.ConditionStatus, probe ...client.Object) metav1.Condition {
	f.T.Helper()
	var cond metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := f.C.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.PolicyConditionReady)
		if c == nil || c.Status != status || c.ObservedGeneration != p.Generation {
			return false, nil
		}
		cond = *c
		return true, nil
	})
	if err != nil {
		f.T.Fatalf("policy %s never had Ready=%s: %+v", p.Name, status, p.Status.Conditions)
	}
	gv, err := schema.ParseGroupVersion(p.Spec.Trigger.Resource.APIVersion)
	if err != nil {
		f.T.Fatal(err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gv.WithKind(p.Spec.Trigger.Resource.Kind))
	var obj client.Object
	if len(probe) > 0 {
		obj = probe[0]
	} else {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gv.WithKind(p.Spec.Trigger.Resource.Kind))
		u.SetNamespace(f.NS)
		u.SetName("in-force-probe")
		obj = u
	}
	if status == metav1.ConditionTrue {
		f.WaitPolicyInForce(gvr, obj, p.Name, p.Generation)
	} else {
		f.WaitPolicyNotInForce(gvr, obj, p.Name)
	}
	return cond
}

// Policy creates a ClaimCreationPolicy named <fixture id>-name: each create of
// kind (apiVersion) in the fixture's namespace claims amount of the
// fixture's resource type rt for the fixture's organization. mutate edits it
// before it is created.
func (f *Fixture) Policy(name, apiVersion, kind, rt string, amount intstr.IntOrString, mutate ...func(*quotav1alpha1.ClaimCreationPolicy)) *quotav1alpha1.ClaimCreationPolicy {
	f.T.Helper()
	p := f.PolicyObject(name, apiVersion, kind, rt, amount, mutate...)
	if err := f.C.Create(context.Background(), p); err != nil {
		f.T.Fatal(err)
	}
	return p
}

// PolicyObject is the policy Policy creates, not created.
func (f *Fixture) PolicyObject(name, apiVersion, kind, rt string, amount intstr.IntOrString, mutate ...func(*quotav1alpha1.ClaimCreationPolicy)) *quotav1alpha1.ClaimCreationPolicy {
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-" + name}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", f.NS)}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind, Name: f.Org.Name},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: string(f.RT(rt)), Amount: amount}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}
