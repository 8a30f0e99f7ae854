package setup

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
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

// The configuration's rules are the kinds of the Ready policies, with
// their scale; the system's namespaces and the excluded ones are left alone.
func TestWebhookConfig(t *testing.T) {
	policies := []quotav1alpha1.ClaimCreationPolicy{
		policy("a", "apps/v1", "Deployment", true, ""),
		policy("b", "v1", "Secret", true, ""),
		policy("c", "example.com/v1", "Gadget", false, ""), // not Ready: no rule
		policy("d", "apps/v1beta2", "Deployment", true, ""),
	}
	c := NewConfigOptions()
	c.URL = "https://127.0.0.1:9443/validate"
	cfg := webhookConfig("east", policies, nil, c, []byte("CA"))
	wh := cfg.Webhooks[0]
	var rules []string
	for _, r := range wh.Rules {
		rules = append(rules, strings.Join(r.APIGroups, ",")+":"+strings.Join(r.Resources, ","))
	}
	if diff := cmp.Diff([]string{":secrets,secrets/scale", "apps:deployments,deployments/scale"}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if *wh.FailurePolicy != admissionregistrationv1.Fail || *wh.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun || *wh.ClientConfig.URL != c.URL || string(wh.ClientConfig.CABundle) != "CA" {
		t.Errorf("webhook = %+v", wh)
	}
	if got := wh.NamespaceSelector.MatchExpressions[0].Values; !cmp.Equal(got, []string{"kube-system", "kube-public", "kube-node-lease", "quotaplane-system"}) {
		t.Errorf("namespaces left alone = %v", got)
	}
	if cfg.Name != "quotaplane-east" {
		t.Errorf("name %s", cfg.Name)
	}
}

// print-rbac: the cluster's namespace, the cluster-wide role and the one
// cluster's role bound in its namespace, for the webhook's identity.
func TestPrintRBAC(t *testing.T) {
	var out strings.Builder
	if err := PrintRBAC("east", RBACOptions{ServiceAccount: "kube-system/webhook-east"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: Namespace", "name: cluster-east", "kind: ClusterRoleBinding", "name: quotaplane-member-webhook",
		"kind: RoleBinding", "namespace: cluster-east", "name: quotaplane-member-cluster", "kind: ServiceAccount", "name: webhook-east",
		"kind: Role\n", "name: quotaplane-member-east-token", "namespace: kube-system", "serviceaccounts/token", "- create", "resourceNames:\n  - webhook-east",
		"--trust-member-cluster-identities=east"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("print-rbac lacks %q:\n%s", want, out.String())
		}
	}
	var user strings.Builder
	if err := PrintRBAC("east", RBACOptions{User: "webhook-east"}, &user); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(user.String(), "serviceaccounts/token") {
		t.Errorf("print-rbac --user grants minting tokens:\n%s", user.String())
	}
	for _, bad := range []RBACOptions{{}, {ServiceAccount: "webhook"}, {ServiceAccount: "a/b", User: "u"}} {
		if err := PrintRBAC("east", bad, &strings.Builder{}); err == nil {
			t.Errorf("print-rbac with %+v: no error", bad)
		}
	}
}

// TestSecretAccess: with --quota-kubeconfig-secret, print-config grants
// the webhook's service account get and update on that Secret, by name.
func TestSecretAccess(t *testing.T) {
	c := NewConfigOptions()
	c.KubeconfigSecret = "quotaplane-system/quota-plane-kubeconfig"
	objs, err := secretAccess("east", c)
	if err != nil {
		t.Fatal(err)
	}
	role, binding := objs[0].(*rbacv1.Role), objs[1].(*rbacv1.RoleBinding)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"quota-plane-kubeconfig"}, Verbs: []string{"get", "update"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" || role.Namespace != "quotaplane-system" {
		t.Errorf("Role in %q (-want +got):\n%s", role.Namespace, diff)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "quotaplane-system", Name: "quotaplane-webhook"}}
	if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" || binding.RoleRef.Name != role.Name || binding.Namespace != role.Namespace {
		t.Errorf("RoleBinding %s/%s of %s (-want +got subjects):\n%s", binding.Namespace, binding.Name, binding.RoleRef.Name, diff)
	}
	for _, bad := range []ConfigOptions{{KubeconfigSecret: "no-namespace"}, {KubeconfigSecret: "a/b", ServiceAccount: "no-namespace"}} {
		if _, err := secretAccess("east", &bad); err == nil {
			t.Errorf("secretAccess with %+v: no error", bad)
		}
	}
}
