package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// reviewLoops is how many review loops each tenant of
// BenchmarkReviewLoadOnOthers runs at once (1: one review after the other).
var reviewLoops = flag.Int("review-loops", 1, "BenchmarkReviewLoadOnOthers: concurrent review loops per tenant")

const (
	reviewLoadTenants    = 8
	reviewLoadCreates    = 1000            // the other tenant's creates, per phase
	reviewLoadPhaseLimit = 3 * time.Minute // the loaded phase stops here, creates done or not
)

// reviewLoadWorld is what every run of BenchmarkReviewLoadOnOthers in one
// process shares: 1,000 namespaces of one ConfigMap each, the review of
// them as JSON, and the eight tenants allowed to post it.
var reviewLoadWorld *struct {
	body    []byte
	tenants []*rest.Config
}

// ownConnection makes cfg's client open a connection of its own: client-go
// shares one transport (one HTTP/2 connection) among configs with the same
// TLS settings, and separate clients do not.
func ownConnection(cfg *rest.Config) {
	cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
}

// BenchmarkReviewLoadOnOthers measures what tenants looping QuotaReviews do
// to another tenant's creates (issue 51, item 3). Eight tenants (users,
// impersonated) each loop reviews of the same 1,000 ConfigMaps, which exist,
// one in each of 1,000 namespaces, so that every review reads 1,000 objects
// (one get each: a namespace holds too few to be listed). A ninth, the other
// tenant, creates Secrets charged by a ClaimCreationPolicy one after the
// other, 1,000 unloaded and then 1,000 while the reviews loop; each create's
// latency is measured. A review refused 429 is counted and posted again
// after its Retry-After. The loaded phase ends when the creates are done, or
// after 3 minutes. -review-loops sets each tenant's loops at once.
func BenchmarkReviewLoadOnOthers(b *testing.B) {
	ctx := context.Background()
	c := quotatest.NewClient(b, srv.Config)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	setUpReviewLoad(b, kube)
	w := reviewLoadWorld

	// The other tenant: creates Secrets in the fixture's namespace, each
	// charged one of a limit that never binds, to the fixture's organization.
	f := quotatest.NewFixture(b, c)
	p := f.SecretsPolicy(1_000_000)
	other := "rl-other-" + f.ID
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: other}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{f.Org.APIGroup}, Resources: []string{"organizations"}, Verbs: []string{"claim"}, ResourceNames: []string{f.Org.Name}}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: other}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: other},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: other}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	quotatest.WaitBound(b, kube, other, nil, other, "") // RBAC authorizes from a cache
	ocfg := rest.CopyConfig(srv.Config)
	ocfg.Impersonate = rest.ImpersonationConfig{UserName: other, Groups: []string{"system:authenticated"}}
	ocfg.QPS, ocfg.Burst = 1000, 2000
	ownConnection(ocfg)
	otherKube := kubernetes.NewForConfigOrDie(ocfg)
	secrets := 0
	create := func(ctx context.Context) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%06d", secrets), Namespace: f.NS}, StringData: map[string]string{"k": "v"}}
		_, err := otherKube.CoreV1().Secrets(f.NS).Create(ctx, s, metav1.CreateOptions{})
		if err == nil {
			secrets++
		}
		return err
	}
	// Until the binding is in force; then 20 creates not measured.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return create(ctx) == nil, nil
	}); err != nil {
		b.Fatalf("the other tenant could not create a Secret within 30 s: %v", create(ctx))
	}
	for range 20 {
		must(b, create(ctx))
	}
	settle(b)

	// creates makes n creates one after the other, until deadline; the
	// latencies of those done, sorted.
	creates := func(ctx context.Context, n int) []time.Duration {
		var took []time.Duration
		for range n {
			start := time.Now()
			err := create(ctx)
			if ctx.Err() != nil {
				break
			}
			must(b, err)
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		return took
	}
	pct := func(d []time.Duration, p int) float64 {
		if len(d) == 0 {
			return 0
		}
		return float64(d[len(d)*p/100].Microseconds()) / 1000
	}

	b.ResetTimer()
	// (1) Unloaded.
	cpu0, wall0, machine0 := processCPU(b), time.Now(), machineCPU(b)
	unloaded := creates(ctx, reviewLoadCreates)
	unloadedCores := float64(processCPU(b)-cpu0) / float64(time.Since(wall0))
	unloadedBusy := machine0.busySince(machineCPU(b))

	// (2) Loaded: the tenants' loops, then the same creates.
	lctx, stop := context.WithTimeout(ctx, reviewLoadPhaseLimit)
	defer stop()
	var mu sync.Mutex
	var answered, refused int
	var reviewTook []time.Duration
	var failed error
	var wg sync.WaitGroup
	began := time.Now()
	for i, cfg := range w.tenants {
		hc, err := rest.HTTPClientFor(cfg)
		must(b, err)
		for range *reviewLoops {
			wg.Go(func() {
				checked := false
				for lctx.Err() == nil {
					start := time.Now()
					code, retry, body, err := postReview(lctx, hc, cfg.Host, w.body, !checked)
					if lctx.Err() != nil {
						return
					}
					mu.Lock()
					switch {
					case err != nil:
						failed = fmt.Errorf("tenant %d: %v", i, err)
					case code == http.StatusCreated:
						answered++
						reviewTook = append(reviewTook, time.Since(start))
						if !checked {
							if err := checkReviewAnswer(body); err != nil {
								failed = fmt.Errorf("tenant %d: %v", i, err)
							}
							checked = true
						}
					case code == http.StatusTooManyRequests:
						refused++
					default:
						failed = fmt.Errorf("tenant %d: a review: %d %s", i, code, body)
					}
					done := failed != nil
					mu.Unlock()
					if done {
						return
					}
					if code == http.StatusTooManyRequests {
						secs, err := strconv.Atoi(retry)
						if err != nil || secs < 1 {
							secs = 1
						}
						select {
						case <-lctx.Done():
						case <-time.After(time.Duration(secs) * time.Second):
						}
					}
				}
			})
		}
	}
	time.Sleep(3 * time.Second) // every loop has a review in flight
	apf0 := globalDefaultWaits(b, kube)
	stopProfile := startWindowProfile(b, "reviewload-loaded")
	cpu1, wall1, machine1 := processCPU(b), time.Now(), machineCPU(b)
	loaded := creates(lctx, reviewLoadCreates)
	loadedCores := float64(processCPU(b)-cpu1) / float64(time.Since(wall1))
	loadedBusy := machine1.busySince(machineCPU(b))
	stopProfile()
	timedOut := lctx.Err() != nil
	apf1 := globalDefaultWaits(b, kube)
	stop()
	wg.Wait()
	window := time.Since(began)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	if len(unloaded) < reviewLoadCreates {
		b.Fatalf("only %d of %d unloaded creates", len(unloaded), reviewLoadCreates)
	}
	slices.Sort(reviewTook)

	b.ReportMetric(pct(unloaded, 50), "unloaded_p50_ms")
	b.ReportMetric(pct(unloaded, 99), "unloaded_p99_ms")
	b.ReportMetric(pct(loaded, 50), "loaded_p50_ms")
	b.ReportMetric(pct(loaded, 99), "loaded_p99_ms")
	b.ReportMetric(pct(loaded, 99)/pct(unloaded, 99), "p99_ratio")
	b.ReportMetric(float64(answered), "reviews")
	b.ReportMetric(float64(refused), "refused_429")
	b.ReportMetric(float64(len(loaded)), "loaded_creates")
	b.ReportMetric(pct(reviewTook, 50), "review_p50_ms")
	b.ReportMetric(unloadedCores, "unloaded_cpu_cores")
	b.ReportMetric(loadedCores, "loaded_cpu_cores")
	b.ReportMetric(unloadedBusy, "unloaded_machine_busy")
	b.ReportMetric(loadedBusy, "loaded_machine_busy")
	b.Logf("%d tenants × %d loops; unloaded creates p50 %.1f ms p99 %.1f ms (process CPU %.2f cores); loaded %d creates p50 %.1f ms p99 %.1f ms (%.2f cores), p99 ratio %.2f; "+
		"%d reviews answered (p50 %.0f ms), %d refused 429, in %s; machine busy %.2f unloaded, %.2f loaded",
		len(w.tenants), *reviewLoops, pct(unloaded, 50), pct(unloaded, 99), unloadedCores, len(loaded), pct(loaded, 50), pct(loaded, 99), loadedCores,
		pct(loaded, 99)/pct(unloaded, 99), answered, pct(reviewTook, 50), refused, window.Round(time.Millisecond), unloadedBusy, loadedBusy)
	b.Logf("API Priority and Fairness, priority level global-default (the tenants' and their reviews' reads): %.0f seats; over the loaded creates %.0f requests dispatched, %.0f of them after waiting 5 ms or more in its queues",
		apf1.seats, apf1.count-apf0.count, (apf1.count-apf0.count)-(apf1.under5ms-apf0.under5ms))
	if timedOut {
		b.Logf("the loaded phase stopped at its bound of %s with %d of %d creates done", reviewLoadPhaseLimit, len(loaded), reviewLoadCreates)
	}

	// Leave the server as it was but for the shared namespaces.
	must(b, c.Delete(ctx, p))
	must(b, kube.RbacV1().ClusterRoleBindings().Delete(ctx, other, metav1.DeleteOptions{}))
	must(b, kube.RbacV1().ClusterRoles().Delete(ctx, other, metav1.DeleteOptions{}))
	removeNamespace(b, c, f.NS)
}

// postReview posts one review; the body of the answer is kept when keep is
// set or the answer is not 201 (read and dropped otherwise).
func postReview(ctx context.Context, hc *http.Client, host string, body []byte, keep bool) (int, string, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(host, "/")+"/apis/quota.miloapis.com/v1alpha1/quotareviews", bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if keep || resp.StatusCode != http.StatusCreated {
		msg, err := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), msg, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil, err
}

// checkReviewAnswer checks that a review answered for every object, each as
// the update of an object that exists: each was read.
func checkReviewAnswer(body []byte) error {
	var r quotav1alpha1.QuotaReview
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	if len(r.Status.Objects) != quotav1alpha1.MaxReviewObjects {
		return fmt.Errorf("the review answered %d objects, want %d", len(r.Status.Objects), quotav1alpha1.MaxReviewObjects)
	}
	for _, o := range r.Status.Objects {
		if o.Operation != "Update" {
			return fmt.Errorf("object %d (%s/%s) reviewed as %q; it exists, so as an Update", o.Index, o.Namespace, o.Name, o.Operation)
		}
	}
	return nil
}

// setUpReviewLoad makes reviewLoadWorld once per process.
func setUpReviewLoad(b *testing.B, kube kubernetes.Interface) {
	if reviewLoadWorld != nil {
		return
	}
	ctx := context.Background()
	prefix := fmt.Sprintf("rl%d", time.Now().UnixNano()%1_000_000)
	n := quotav1alpha1.MaxReviewObjects
	review := &quotav1alpha1.QuotaReview{TypeMeta: metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "QuotaReview"}}
	cms := make([]*corev1.ConfigMap, n)
	for i := range n {
		cms[i] = &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: fmt.Sprintf("%s-%04d", prefix, i)}, Data: map[string]string{"a": "b"}}
		raw, err := json.Marshal(cms[i])
		must(b, err)
		review.Spec.Objects = append(review.Spec.Objects, runtime.RawExtension{Raw: raw})
	}
	quotatest.ForEach(b, n, func(i int) error {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cms[i].Namespace}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := kube.CoreV1().ConfigMaps(cms[i].Namespace).Create(ctx, cms[i].DeepCopy(), metav1.CreateOptions{})
		return err
	})
	body, err := json.Marshal(review)
	must(b, err)

	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{quotav1alpha1.GroupName}, Resources: []string{"quotareviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch"}}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	var tenants []*rest.Config
	for i := range reviewLoadTenants {
		name := fmt.Sprintf("%s-tenant-%d", prefix, i)
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		quotatest.WaitBound(b, kube, name, nil, role.Name, "") // RBAC authorizes from a cache
		cfg := rest.CopyConfig(srv.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
		ownConnection(cfg)
		tenants = append(tenants, cfg)
	}
	// Until every tenant's review is answered: a review of one object, as
	// that object's update.
	one, err := json.Marshal(&quotav1alpha1.QuotaReview{TypeMeta: review.TypeMeta, Spec: quotav1alpha1.QuotaReviewSpec{Objects: review.Spec.Objects[:1]}})
	must(b, err)
	for i, cfg := range tenants {
		hc, err := rest.HTTPClientFor(cfg)
		must(b, err)
		var code int
		var msg []byte
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			code, _, msg, err = postReview(ctx, hc, cfg.Host, one, true)
			return err == nil && code == http.StatusCreated, nil
		}); err != nil {
			b.Fatalf("tenant %d could not review within 30 s: %d %s", i, code, msg)
		}
	}
	reviewLoadWorld = &struct {
		body    []byte
		tenants []*rest.Config
	}{body, tenants}
}

// settle waits until the server is quiet: the process used under 0.2 of a
// core over the last second (the set-up's and warm-up's asynchronous work
// done: claims, buckets, the controllers' passes over new namespaces), or
// 60 s have passed.
func settle(b *testing.B) {
	deadline := time.Now().Add(time.Minute)
	for {
		cpu, wall := processCPU(b), time.Now()
		time.Sleep(time.Second)
		cores := float64(processCPU(b)-cpu) / float64(time.Since(wall))
		if cores < 0.2 || time.Now().After(deadline) {
			b.Logf("settled: %.2f cores over the last second", cores)
			return
		}
	}
}

// cpuTimes is the machine's CPU time from /proc/stat: busy and total
// jiffies over all cores.
type cpuTimes struct{ busy, total uint64 }

func machineCPU(b *testing.B) cpuTimes {
	raw, err := os.ReadFile("/proc/stat")
	must(b, err)
	line, _, _ := strings.Cut(string(raw), "\n")
	var t cpuTimes
	for i, f := range strings.Fields(line)[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		must(b, err)
		if i >= 8 { // guest and guest_nice are counted in user and nice
			break
		}
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busySince is the fraction of all cores' time busy from t to now (1: every
// core busy, whoever used it).
func (t cpuTimes) busySince(now cpuTimes) float64 {
	if now.total == t.total {
		return 0
	}
	return float64(now.busy-t.busy) / float64(now.total-t.total)
}

// apfWaits are API Priority and Fairness's figures for the priority level
// global-default: its nominal seats, and how many requests it has
// dispatched (executed), in all and after under 5 ms in a queue.
type apfWaits struct{ seats, count, under5ms float64 }

func globalDefaultWaits(b *testing.B, kube kubernetes.Interface) apfWaits {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(b, err)
	var w apfWaits
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.Contains(line, `priority_level="global-default"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "apiserver_flowcontrol_nominal_limit_seats{"):
			w.seats = v
		case strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_count{") && strings.Contains(line, `execute="true"`):
			w.count += v
		case strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_bucket{") && strings.Contains(line, `execute="true"`) && strings.Contains(line, `le="0.005"`):
			w.under5ms += v
		}
	}
	return w
}
