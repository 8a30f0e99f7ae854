// Package rollout tests rolling out a ClaimCreationPolicy against the real
// server: modes Audit and Warn, which charge nothing, the policy's
// status.impact, staged edits, the switch to Enforce, and the preview
// (QuotaReview spec.policy) — docs/admission.md, "Rolling out a policy".
package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	// A trial's impact is computed again every second, so that objects
	// created during a test are in it soon.
	o.PolicyImpactEvery = time.Second
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}

// world is a fixture whose resource type "configmaps" is claimed by
// ConfigMaps, granted limit to the fixture's organization, and a kube client
// that collects the warnings it is sent.
type world struct {
	*quotatest.Fixture
	t      *testing.T
	kube   kubernetes.Interface
	warned *quotatest.Warnings
}

func newWorld(t *testing.T, limit int64) *world {
	t.Helper()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"configmaps"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	if limit > 0 {
		f.Grant("g", map[string][]quotatest.Bucket{"configmaps": {{Amount: limit}}})
	}
	w := &world{Fixture: f, t: t, warned: &quotatest.Warnings{}}
	cfg := rest.CopyConfig(srv.Config)
	cfg.WarningHandler = w.warned
	w.kube = kubernetes.NewForConfigOrDie(cfg)
	return w
}

// policy creates a policy charging amount (a template over the ConfigMap)
// of "configmaps" for each ConfigMap of the fixture's namespace, in mode.
func (w *world) policy(amount string, mode quotav1alpha1.PolicyMode) *quotav1alpha1.ClaimCreationPolicy {
	w.t.Helper()
	p := w.Policy("p", "v1", "ConfigMap", "configmaps", intstr.FromString(amount), func(p *quotav1alpha1.ClaimCreationPolicy) { p.Spec.Mode = mode })
	w.waitPolicy(p, "Ready at its generation", func(p *quotav1alpha1.ClaimCreationPolicy) bool { return ready(p) })
	return p
}

func ready(p *quotav1alpha1.ClaimCreationPolicy) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == quotav1alpha1.PolicyConditionReady {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == p.Generation && p.Status.ObservedGeneration == p.Generation
		}
	}
	return false
}

// edit changes the policy, retrying on conflicts with the engine's status
// writes, and waits until it is Ready at the new generation.
func (w *world) edit(p *quotav1alpha1.ClaimCreationPolicy, change func(*quotav1alpha1.ClaimCreationPolicy)) {
	w.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		change(p)
		return w.C.Update(context.Background(), p)
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.waitPolicy(p, "Ready at its new generation", ready)
}

// waitPolicy polls the policy until done holds, and fails with its status.
func (w *world) waitPolicy(p *quotav1alpha1.ClaimCreationPolicy, what string, done func(*quotav1alpha1.ClaimCreationPolicy) bool) {
	w.t.Helper()
	w.waitPolicyFor(p, what, 30*time.Second, done)
}

// waitPolicyFor is waitPolicy for up to timeout.
func (w *world) waitPolicyFor(p *quotav1alpha1.ClaimCreationPolicy, what string, timeout time.Duration, done func(*quotav1alpha1.ClaimCreationPolicy) bool) {
	w.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, nil
		}
		return done(p), nil
	})
	if err != nil {
		w.t.Fatalf("ClaimCreationPolicy %s (generation %d) was not %s within %s; its status: %s", p.Name, p.Generation, what, timeout, statusText(p))
	}
}

func statusText(p *quotav1alpha1.ClaimCreationPolicy) string {
	return fmt.Sprintf("mode %q, conditions %+v, enforced %+v, trial %+v, impact %+v, existingObjects %+v",
		p.Status.Mode, p.Status.Conditions, p.Status.Enforced, p.Status.Trial, p.Status.Impact, p.Status.ExistingObjects)
}

// waitInForce waits until admission judges creates with generation gen of
// the policy in mode (a dry run's warning says so).
func (w *world) waitInForce(p *quotav1alpha1.ClaimCreationPolicy, gen int64, mode quotav1alpha1.PolicyMode) {
	w.t.Helper()
	want := fmt.Sprintf("ClaimCreationPolicy %s (generation %d, mode %s)", p.Name, gen, mode)
	if mode == quotav1alpha1.PolicyModeEnforce {
		want = fmt.Sprintf("ClaimCreationPolicy %s (generation %d) would charge", p.Name, gen)
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe"}, Data: map[string]string{"replicas": "1", "n": "1"}}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		w.warned.Reset()
		_, _ = w.kube.CoreV1().ConfigMaps(w.NS).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return w.warned.Contains(want), nil
	})
	if err != nil {
		w.t.Fatalf("a dry run never said %q; it said %q", want, w.warned.All())
	}
	w.warned.Reset()
}

func (w *world) configMap(name string, data map[string]string) (*corev1.ConfigMap, error) {
	return w.kube.CoreV1().ConfigMaps(w.NS).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
}

func (w *world) mustConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	w.t.Helper()
	cm, err := w.configMap(name, data)
	if err != nil {
		w.t.Fatalf("creating ConfigMap %s: %v", name, err)
	}
	return cm
}

// claims are the claims the policy made, by the UID of their object.
func (w *world) claims(p *quotav1alpha1.ClaimCreationPolicy) map[string][]quotav1alpha1.ResourceClaim {
	w.t.Helper()
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.C.List(context.Background(), list, client.MatchingLabels{quotav1alpha1.LabelPolicy: p.Name}); err != nil {
		w.t.Fatal(err)
	}
	out := map[string][]quotav1alpha1.ResourceClaim{}
	for _, c := range list.Items {
		uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
		out[uid] = append(out[uid], c)
	}
	return out
}

// onceEach fails unless each object holds exactly one claim of p.
func (w *world) onceEach(p *quotav1alpha1.ClaimCreationPolicy, objs ...*corev1.ConfigMap) {
	w.t.Helper()
	claims := w.claims(p)
	for _, o := range objs {
		if n := len(claims[string(o.UID)]); n != 1 {
			w.t.Errorf("ConfigMap %s holds %d claims of policy %s, want exactly 1", o.Name, n, p.Name)
		}
	}
	if len(claims) != len(objs) {
		w.t.Errorf("policy %s made claims for %d objects, want %d", p.Name, len(claims), len(objs))
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// row is the policy's row as kubectl get shows it (the server's Table,
// every column, -o wide's included), by column name.
func (w *world) row(name string) map[string]string {
	w.t.Helper()
	hc, err := rest.HTTPClientFor(srv.Config)
	if err != nil {
		w.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(srv.Config.Host, "/")+"/apis/quota.miloapis.com/v1alpha1/claimcreationpolicies/"+name, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var tab metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&tab); err != nil || len(tab.Rows) != 1 {
		w.t.Fatalf("the table of ClaimCreationPolicy %s: %v, %d rows", name, err, len(tab.Rows))
	}
	out := map[string]string{}
	for i, c := range tab.ColumnDefinitions {
		if i < len(tab.Rows[0].Cells) {
			out[c.Name] = fmt.Sprint(tab.Rows[0].Cells[i])
		}
	}
	return out
}
