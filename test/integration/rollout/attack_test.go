package rollout

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/testutil"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// A tenant may not park objects that would charge another tenant while a
// policy only audits, waiting for the switch to enforce: authorization of
// the consumer runs in every mode, and refuses.
func TestAuditDoesNotLetATenantChargeAConsumerItMayNotClaim(t *testing.T) {
	w := newWorld(t, 10)
	ctx := context.Background()
	victim := "victim-" + w.ID
	p := w.Policy("p", "v1", "ConfigMap", "configmaps", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Mode = quotav1alpha1.PolicyModeAudit
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef.Name = "{{ trigger.metadata.?labels.org.orValue('" + w.Org.Name + "') }}"
	})
	w.waitPolicy(p, "Ready", ready)
	w.waitInForce(p, p.Generation, quotav1alpha1.PolicyModeAudit)

	// mallory may create ConfigMaps in the namespace and charge the
	// fixture's organization, not the victim.
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	role := "rollout-mallory-" + w.ID
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}},
		{APIGroups: []string{quota.OrganizationGroup}, Resources: []string{"organizations"}, Verbs: []string{"claim"}, ResourceNames: []string{w.Org.Name}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: role}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quotatest.WaitAllowed(t, []kubernetes.Interface{admin}, role, nil,
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: quota.OrganizationGroup, Resource: "organizations", Name: w.Org.Name},
		&authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: w.NS})
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: role, Groups: []string{"system:authenticated"}}
	mallory := kubernetes.NewForConfigOrDie(cfg)

	_, err = mallory.CoreV1().ConfigMaps(w.NS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parked", Labels: map[string]string{"org": victim}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "mode Audit charges nothing, but whoever creates an object must be allowed to charge its consumer in every mode") ||
		!strings.Contains(err.Error(), victim) {
		t.Fatalf("mallory parking a ConfigMap charged to %s under mode Audit: %v; want 403 naming the consumer and the rule", victim, err)
	}
	if _, err := w.kube.CoreV1().ConfigMaps(w.NS).Get(ctx, "parked", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused ConfigMap is stored: %v", err)
	}
	// Her own organization's she may.
	if _, err := mallory.CoreV1().ConfigMaps(w.NS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "own"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("mallory creating a ConfigMap charged to her own organization under mode Audit: %v", err)
	}
	if n := len(w.claims(p)); n != 0 {
		t.Errorf("mode Audit made %d claims", n)
	}
	m := scrape(t)
	if got := count(m, p.Name, "audit", "unauthorized"); got < 1 {
		t.Errorf("milo_quota_admission_result_total{mode=audit,result=unauthorized,policy_name=%s} = %v, want at least 1", p.Name, got)
	}
	if got := count(m, p.Name, "audit", "would_charge"); got < 1 {
		t.Errorf("milo_quota_admission_result_total{mode=audit,result=would_charge,policy_name=%s} = %v, want at least 1", p.Name, got)
	}
}

// scrape reads the server's /metrics.
func scrape(t *testing.T) testutil.Metrics {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(srv.Config).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := testutil.NewMetrics()
	if err := testutil.ParseMetrics(string(raw), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// count is the admission result family's value for a policy, mode and
// result.
func count(m testutil.Metrics, policy, mode, result string) float64 {
	var n float64
	for _, s := range m["milo_quota_admission_result_total"] {
		if string(s.Metric["policy_name"]) == policy && string(s.Metric["mode"]) == mode && string(s.Metric["result"]) == result {
			n += float64(s.Value)
		}
	}
	return n
}
