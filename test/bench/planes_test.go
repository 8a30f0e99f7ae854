package bench

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkPlaneAdmission measures creates/s of Secrets charged to a
// Project, b.N per round by 16 clients: (a) at the root, by a
// ClaimCreationPolicy naming the project; (b) in the project's control
// plane, by a policy without consumerRef (the plane's project). The modes
// alternate for 5 rounds; it reports the medians and (b)/(a).
func BenchmarkPlaneAdmission(b *testing.B) {
	quotatest.Exclusive(b)
	ctx := context.Background()
	c := quotatest.NewClient(b, srv.Config)
	f := quotatest.NewFixture(b, c)
	org, project := "pl-"+f.ID, "pl-"+f.ID+"-p"
	rt := string(f.RT("secrets"))
	for _, o := range []client.Object{
		&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-secrets"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
			Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "secret",
			ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "Secret"}}}},
		&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}},
		&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: project},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}},
		&quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "project", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project},
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: int64(20 * b.N)}}}}}},
	} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	policy := func(mode string, consumer quotav1alpha1.TemplateConsumerRef) *quotav1alpha1.ClaimCreationPolicy {
		p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-" + mode}}
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.bench.orValue('') == %q", f.ID+"-"+mode)}}
		p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{ConsumerRef: consumer,
			Requests: []quotav1alpha1.ClaimTemplateRequest{{ResourceType: rt, Amount: intstr.FromInt32(1)}}}
		if err := c.Create(ctx, p); err != nil {
			b.Fatal(err)
		}
		f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
		return p
	}
	policy("root", quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project})
	policy("plane", quotav1alpha1.TemplateConsumerRef{})
	waitProjectsReady(b, c, []string{project})
	planeCfg := planes.ConfigFor(srv.Config, planes.Plane{Kind: planes.Projects, Name: project})
	modes := map[string]struct {
		cfg *rest.Config
		ns  string
	}{"a-root": {srv.Config, f.NS}, "b-plane": {planeCfg, "default"}}
	order := []string{"a-root", "b-plane"}
	rates := map[string][]float64{}
	b.StopTimer()
	for round := range 5 {
		for k := range order {
			m := order[(round+k)%len(order)]
			mode := strings.TrimPrefix(strings.TrimPrefix(m, "a-"), "b-")
			r := secretsPerSecond(b, modes[m].cfg, modes[m].ns, f.ID+"-"+mode, fmt.Sprintf("r%d", round), b.N, 16)
			rates[m] = append(rates[m], r)
			b.Logf("round %d %s: %.0f creates/s", round+1, m, r)
		}
	}
	for _, m := range order {
		b.ReportMetric(median(rates[m]), m+"-creates/s")
	}
	b.ReportMetric(median(rates["b-plane"])/median(rates["a-root"]), "plane/root")
}

func median(v []float64) float64 {
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	return v[len(v)/2]
}

// secretsPerSecond creates n Secrets labelled bench=label through cfg in
// namespace ns with the given number of clients, and returns creates/s.
func secretsPerSecond(b *testing.B, cfg *rest.Config, ns, label, prefix string, n, clients int) float64 {
	b.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5000, 5000
	kube := kubernetes.NewForConfigOrDie(cfg)
	var next, failed atomic.Int64
	start := time.Now()
	done := make(chan struct{})
	for range clients {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Labels: map[string]string{"bench": label}}}
				if _, err := kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for range clients {
		<-done
	}
	elapsed := time.Since(start)
	if failed.Load() > 0 {
		b.Fatalf("%d of %d creates failed", failed.Load(), n)
	}
	return float64(n) / elapsed.Seconds()
}

// waitProjectsReady waits until every named project is Ready.
func waitProjectsReady(b *testing.B, c client.Client, names []string) {
	b.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &rmv1alpha1.ProjectList{}
		if err := c.List(ctx, list); err != nil {
			return false, nil
		}
		ready := 0
		for _, p := range list.Items {
			if want[p.Name] && meta.IsStatusConditionTrue(p.Status.Conditions, rmv1alpha1.ConditionReady) {
				ready++
			}
		}
		return ready == len(want), nil
	})
	if err != nil {
		b.Fatalf("%d projects never all became Ready", len(names))
	}
}

// heapMiB is the live heap after a collection, in MiB.
func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// BenchmarkIdlePlanes creates 1,000 projects, then uses each one's control
// plane once (the first request, which prepares it) and leaves it idle. It
// reports the heap each idle plane costs the server (the live heap after
// all planes were used, minus before, per plane: the process runs the
// server in-process), the heap each project costs with its plane, and the
// time to the first request served in a new plane (median and p99).
func BenchmarkIdlePlanes(b *testing.B) {
	quotatest.Exclusive(b)
	const n = 1000
	ctx := context.Background()
	c := quotatest.NewClient(b, srv.Config)
	f := quotatest.NewFixture(b, c)
	org := "idle-" + f.ID
	if err := c.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	before := heapMiB()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", org, i)
	}
	quotatest.ForEach(b, n, func(i int) error {
		return c.Create(ctx, &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: names[i]},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}})
	})
	waitProjectsReady(b, c, names)
	projectsOnly := heapMiB()
	firsts := make([]time.Duration, n)
	cfg := rest.CopyConfig(srv.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	for i, name := range names {
		kube := kubernetes.NewForConfigOrDie(planes.ConfigFor(cfg, planes.Plane{Kind: planes.Projects, Name: name}))
		start := time.Now()
		if _, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			b.Fatalf("the first request to %s's plane: %v", name, err)
		}
		firsts[i] = time.Since(start)
	}
	time.Sleep(2 * time.Second) // idle
	used := heapMiB()
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	b.Logf("heap: %.1f MiB before, %.1f with %d projects, %.1f with their planes used once and idle", before, projectsOnly, n, used)
	b.ReportMetric((used-projectsOnly)*1024/n, "KiB/idle-plane")
	b.ReportMetric((used-before)*1024/n, "KiB/project-with-plane")
	b.ReportMetric(float64(firsts[n/2].Microseconds())/1000, "ms-first-request-p50")
	b.ReportMetric(float64(firsts[n*99/100].Microseconds())/1000, "ms-first-request-p99")

	// The planes' garbage collector: a sweep over every plane holding data
	// (each holds its two namespaces), as the leader makes at the start of
	// its term and every 10 minutes, and what it leaves on the heap.
	st, err := srv.PlaneCollector.Sweep(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if st.Planes < n {
		b.Fatalf("the sweep passed over %d planes, want at least %d", st.Planes, n)
	}
	time.Sleep(2 * time.Second)
	swept := heapMiB()
	b.Logf("sweep: %d planes in %v; heap %.1f MiB after it (%.1f before)", st.Planes, st.Took, swept, used)
	b.ReportMetric(float64(st.Took.Microseconds())/1000/float64(st.Planes), "ms-sweep-per-plane")
	b.ReportMetric((swept-used)*1024/n, "KiB/plane-after-sweep")

	// A namespace deleted in a plane, holding 20 objects: from the delete
	// to the namespace gone (its objects deleted through the plane first).
	const deleted, objects = 20, 20
	took := make([]time.Duration, deleted)
	for i := range deleted {
		kube := kubernetes.NewForConfigOrDie(planes.ConfigFor(cfg, planes.Plane{Kind: planes.Projects, Name: names[i]}))
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gc"}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		for j := range objects {
			if _, err := kube.CoreV1().ConfigMaps("gc").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", j)}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		if err := kube.CoreV1().Namespaces().Delete(ctx, "gc", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Namespaces().Get(ctx, "gc", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			b.Fatalf("namespace gc of %s's plane not gone: %v", names[i], err)
		}
		took[i] = time.Since(start)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.Logf("a plane namespace holding %d objects deleted in %v (median of %d; min %v, max %v)", objects, took[deleted/2], deleted, took[0], took[deleted-1])
	b.ReportMetric(float64(took[deleted/2].Microseconds())/1000, "ms-namespace-deleted-p50")
}
