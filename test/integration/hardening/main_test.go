// Package hardening tests, against the real server, the ways quota could be
// bypassed, leaked or wedged (issue "Close every way quota can be bypassed,
// leaked or wedged"): each test counts what is stored against what is
// charged, as an adversarial user would.
package hardening

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var (
	srv *testserver.Server
	// faults are injected into srv's engine; tests switch them
	// (TestASlowCreateHoldsItsQuotaUntilStored).
	faults = &testserver.Faults{}
)

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o, Faults: faults})
}

// world is one test's resource type "units" (claimed by ConfigMaps and
// Secrets), its organization with limit units, and its namespace.
type world struct {
	*quotatest.Fixture
}

func newWorld(t *testing.T, limit int64) *world {
	t.Helper()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"units"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"}, quotav1alpha1.ClaimingResource{Kind: "Secret"})
	f.Limit = limit
	f.Grant("g", map[string][]quotatest.Bucket{"units": {{Amount: limit}}})
	return &world{f}
}

// policy charges one unit per ConfigMap created in the world's namespace.
func (w *world) policy(name string, mutate ...func(*quotav1alpha1.ClaimCreationPolicy)) *quotav1alpha1.ClaimCreationPolicy {
	w.T.Helper()
	return w.Policy(name, "v1", "ConfigMap", "units", intstr.FromInt32(1), mutate...)
}

func (w *world) configMap(ns, name string, labels ...string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}}}
	for i := 0; i+1 < len(labels); i += 2 {
		cm.Labels[labels[i]] = labels[i+1]
	}
	return w.C.Create(context.Background(), cm)
}

func (w *world) claimsIn(ns string) []quotav1alpha1.ResourceClaim {
	w.T.Helper()
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.C.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		w.T.Fatal(err)
	}
	return list.Items
}

// grantedFor counts the granted claims in ns that name an object of uid.
func grantedFor(claims []quotav1alpha1.ResourceClaim, uid string) int {
	n := 0
	for _, c := range claims {
		if c.Annotations[quotav1alpha1.AnnotationResourceUID] == uid && meta.IsStatusConditionTrue(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
			n++
		}
	}
	return n
}

// uncharged lists the ConfigMaps in ns with no granted claim in claimNS.
func (w *world) uncharged(ns, claimNS string) (stored int, uncharged []string) {
	w.T.Helper()
	list := &corev1.ConfigMapList{}
	if err := w.C.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		w.T.Fatal(err)
	}
	claims := w.claimsIn(claimNS)
	for _, cm := range list.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		stored++
		if grantedFor(claims, string(cm.UID)) == 0 {
			uncharged = append(uncharged, cm.Name)
		}
	}
	return stored, uncharged
}

// eventually polls cond for up to timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s", what, timeout)
	}
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err.Error(), p)
		}
	}
}
