package webhook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
)

func policy(name, apiVersion, kind string, ready bool, fp quotav1alpha1.FailurePolicy) quotav1alpha1.ClaimCreationPolicy {
	p := quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: apiVersion, Kind: kind}
	p.Spec.FailurePolicy = fp
	st := metav1.ConditionFalse
	if ready {
		st = metav1.ConditionTrue
	}
	p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: st}}
	return p
}

func TestGoverningAndFailOpen(t *testing.T) {
	s := &policySet{list: func() []quotav1alpha1.ClaimCreationPolicy {
		return []quotav1alpha1.ClaimCreationPolicy{
			policy("a", "v1", "Secret", true, quotav1alpha1.FailurePolicyIgnore),
			policy("b", "apps/v1", "Deployment", true, quotav1alpha1.FailurePolicyIgnore),
			policy("c", "apps/v1beta1", "Deployment", true, ""),
		}
	}}
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	if g := s.governing(secret); len(g) != 1 || !allIgnore(g) {
		t.Errorf("Secrets: governed by %v, all Ignore %v", g.names(), allIgnore(g))
	}
	dep := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	if g := s.governing(dep); len(g) != 2 || allIgnore(g) {
		t.Errorf("Deployments (any version): governed by %v; one is Fail, so not fail-open", g.names())
	}
	if g := s.governing(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}); len(g) != 0 || allIgnore(g) {
		t.Errorf("ConfigMaps governed by %v", g.names())
	}
}

// A member's administrators are not passed on as the quota plane's; names
// go as the member's own, marked so that the quota plane maps them, whatever
// the ignored flags of earlier versions say.
func TestMapUser(t *testing.T) {
	mark := authenticationv1.ExtraValue{members.IdentitiesMember}
	for name, opts := range map[string]*Options{
		"default":                    {ClusterName: "east"},
		"an earlier custom prefix":   {ClusterName: "east", UserPrefix: "corp:", GroupPrefix: "corp:"},
		"earlier trusted identities": {ClusterName: "east", TrustClusterIdentities: true},
	} {
		w := &Webhook{opts: opts}
		// A requester cannot pass for the webhook's review of an existing
		// object, nor say its names are mapped (impersonation can set any
		// extra).
		got := w.mapUser(authenticationv1.UserInfo{Username: "alice", Groups: []string{"system:masters", "devs"},
			Extra: map[string]authenticationv1.ExtraValue{existingExtra: {"true"}, members.IdentitiesExtra: {"mapped"}, "team": {"a"}}})
		want := authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}, Extra: map[string]authenticationv1.ExtraValue{members.IdentitiesExtra: mark, "team": {"a"}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	o := NewOptions()
	err := o.Validate()
	for _, want := range []string{"--quota-kubeconfig is required", "--cluster-name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to say %q", err, want)
		}
	}
	o.QuotaKubeconfig, o.ClusterName, o.TLSCertFile = "q", "east", "cert.pem"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("a certificate without its key: %v", err)
	}
	o.TLSCertFile, o.QuotaSyncTimeout = "", 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--quota-sync-timeout") {
		t.Errorf("an unbounded start: %v", err)
	}
}

// The serving certificate is read again when its file changes.
func TestCertificateReload(t *testing.T) {
	o := NewOptions()
	o.CertDir, o.BindAddress = t.TempDir(), "127.0.0.1"
	c, err := o.servingCerts()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := c.get(nil)
	// Another certificate in its place, as cert-manager renews it.
	other := NewOptions()
	other.CertDir, other.BindAddress = t.TempDir(), "127.0.0.1"
	if _, err := other.servingCerts(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		data, err := os.ReadFile(filepath.Join(other.CertDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(o.CertDir, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(time.Minute)
	_ = os.Chtimes(filepath.Join(o.CertDir, "tls.crt"), future, future)
	c.checked = time.Time{}
	second, _ := c.get(nil)
	if string(first.Certificate[0]) == string(second.Certificate[0]) {
		t.Error("the renewed certificate was not read")
	}
}

// The reconcile and verify act on the same comparison: a claim whose object
// is not in the cluster is suspect once older than release-after (never a
// claim being deleted); an object no live claim names is unclaimed.
func TestCompare(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	claim := func(name, uid string, age time.Duration, deleting bool) quotav1alpha1.ResourceClaim {
		c := quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Annotations: map[string]string{quotav1alpha1.AnnotationResourceUID: uid}}}
		if deleting {
			c.DeletionTimestamp = &c.CreationTimestamp
		}
		return c
	}
	objects := map[string]memberObject{"a": {uid: "a"}, "b": {uid: "b"}, "c": {uid: "c"}}
	got := compare(objects, []quotav1alpha1.ResourceClaim{
		claim("of-a", "a", time.Hour, false),         // its object is here
		claim("gone-old", "x", 3*time.Minute, false), // suspect
		claim("gone-young", "y", time.Minute, false), // may still be being stored
		claim("of-b-deleting", "b", time.Hour, true), // b is unclaimed
		claim("gone-deleting", "z", time.Hour, true), // already going
	}, now, 2*time.Minute)
	var suspect, unclaimed []string
	for _, c := range got.suspect {
		suspect = append(suspect, c.Name)
	}
	for _, o := range got.unclaimed {
		unclaimed = append(unclaimed, o.uid)
	}
	if diff := cmp.Diff([]string{"gone-old"}, suspect); diff != "" {
		t.Errorf("suspect (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, unclaimed); diff != "" {
		t.Errorf("unclaimed (-want +got):\n%s", diff)
	}
}

// TestTheBindAddressHelpSaysEveryInterface: the webhook listens on every
// interface by default, and its help says so and how to narrow it.
func TestTheBindAddressHelpSaysEveryInterface(t *testing.T) {
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	o := NewOptions()
	o.AddFlags(fs)
	f := fs.Lookup("bind-address")
	if f == nil || f.DefValue != "0.0.0.0" || !strings.Contains(f.Usage, "every interface") || !strings.Contains(f.Usage, "127.0.0.1") {
		t.Fatalf("--bind-address: %+v; want default 0.0.0.0 and help saying it is every interface, and how to serve only this machine", f)
	}
}
