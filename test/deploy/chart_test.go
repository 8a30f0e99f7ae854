package deploy_test

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"

	"github.com/quotaplane/quotaplane/test/deploy"
)

// TestChartLints runs Helm's linter (Chart.yaml, values, templates, CRDs)
// with the values of each mode. Informational messages are logged; a
// warning or an error fails. (With the defaults alone the linter reports the
// chart's own failure: clusterName is required.)
func TestChartLints(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"member":       memberValues(nil),
		"cert-manager": memberValues(map[string]any{"certManager": map[string]any{"enabled": true}}),
		"controller":   {"webhook": map[string]any{"enabled": false}, "controller": map[string]any{"enabled": true}},
	} {
		t.Run(name, func(t *testing.T) {
			result := lint.RunAll(deploy.ChartDir, values, testRelease.Namespace)
			for _, m := range result.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %v", m)
				} else {
					t.Logf("lint: %v", m)
				}
			}
		})
	}
}

// TestChartRequiresClusterNameAndSecret: the webhook cannot run without the
// cluster's name and the quota plane's kubeconfig; rendering fails saying
// which value to set. Without the webhook neither is needed.
func TestChartRequiresClusterNameAndSecret(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"defaults", nil, "clusterName is empty"},
		{"no secret", map[string]any{"clusterName": "member"}, "quotaPlane.kubeconfigSecret is empty"},
		{"no name", map[string]any{"quotaPlane": map[string]any{"kubeconfigSecret": "s"}}, "clusterName is empty"},
		{"bad name", memberValues(map[string]any{"clusterName": "Member_1"}), `clusterName "Member_1" is not a DNS label`},
		{"long name", memberValues(map[string]any{"clusterName": strings.Repeat("a", 56)}), "is not a DNS label of at most 55 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deploy.Render(c, testRelease, tc.values, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("rendering with %v: error %v; want one saying %q", tc.values, err, tc.want)
			}
			if !strings.Contains(err.Error(), "--set") {
				t.Errorf("the error does not say what to do: %v", err)
			}
		})
	}
	if _, err := deploy.Render(c, testRelease, map[string]any{"webhook": map[string]any{"enabled": false}}, nil); err != nil {
		t.Errorf("without the webhook, rendering needs no cluster name: %v", err)
	}
}

// TestChartWebhook checks the member-cluster install the defaults make.
func TestChartWebhook(t *testing.T) {
	r := render(t, memberValues(nil))
	if want := []string{"ServiceAccount", "Secret", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment", "PodDisruptionBudget", "ValidatingWebhookConfiguration"}; !slices.Equal(r.kinds(), want) {
		t.Errorf("renders %v; want %v (the controller is off by default)", r.kinds(), want)
	}

	d := r.deployment(t, webhookName)
	checkPodSecurity(t, d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("webhook replicas %v; want 2", d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != webhookName {
		t.Errorf("serviceAccountName %q; want %q", pod.ServiceAccountName, webhookName)
	}
	ctr := pod.Containers[0]
	wantArgs := []string{"webhook",
		"--quota-kubeconfig=/etc/quotaplane/quota-plane/kubeconfig",
		"--quota-kubeconfig-secret=" + testRelease.Namespace + "/" + kubeconfigSecret,
		"--quota-token-lifetime=168h",
		"--cluster-name=" + testClusterName,
		"--secure-port=9443",
		"--tls-cert-file=/etc/quotaplane/tls/tls.crt",
		"--tls-private-key-file=/etc/quotaplane/tls/tls.key",
		"--reconcile-period=1m"}
	if diff := cmp.Diff(wantArgs, ctr.Args); diff != "" || len(ctr.Command) != 0 {
		t.Errorf("webhook command line (-want +got):\n%s (command %v)", diff, ctr.Command)
	}
	if len(ctr.Ports) != 1 || ctr.Ports[0].Name != "https" || ctr.Ports[0].ContainerPort != 9443 {
		t.Errorf("webhook ports %+v; want https 9443", ctr.Ports)
	}
	for name, probe := range map[string]*corev1.Probe{"startup": ctr.StartupProbe, "readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
		want := "/readyz"
		if name == "liveness" {
			want = "/healthz"
		}
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != want || probe.HTTPGet.Scheme != corev1.URISchemeHTTPS || probe.HTTPGet.Port != intstr.FromString("https") {
			t.Errorf("%s probe %+v; want HTTPS GET %s on https", name, probe, want)
		}
	}
	secrets := map[string]string{}
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	if want := map[string]string{"quota-plane": kubeconfigSecret, "tls": tlsSecretName}; !cmp.Equal(secrets, want) {
		t.Errorf("secret volumes %v; want %v", secrets, want)
	}

	pdb := typed[policyv1.PodDisruptionBudget](t, r.find(t, "PodDisruptionBudget", webhookName))
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) || !cmp.Equal(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget %+v; want minAvailable 1 over the webhook's pods", pdb.Spec)
	}
	svc := typed[corev1.Service](t, r.find(t, "Service", webhookName))
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("https") || !cmp.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("Service %+v; want 443 → https (9443) of the webhook's pods", svc.Spec)
	}

	vwc := r.webhookConfiguration(t)
	checkWebhookConfiguration(t, vwc)
	if got := vwc.Labels["quota.miloapis.com/cluster"]; got != testClusterName {
		t.Errorf("the webhook configuration's cluster label is %q; want %q, as print-config labels it", got, testClusterName)
	}
	if len(vwc.Webhooks[0].Rules) != 0 {
		t.Errorf("rules %v; want none by default", vwc.Webhooks[0].Rules)
	}

	// The generated certificate: a serving certificate for the Service's
	// name, signed by the CA in caBundle; the pods restart when it changes.
	secret := typed[corev1.Secret](t, r.find(t, "Secret", tlsSecretName))
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type %q; want %q", secret.Type, corev1.SecretTypeTLS)
	}
	if string(vwc.Webhooks[0].ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
		t.Errorf("caBundle is not the Secret's ca.crt")
	}
	checkServingCertificate(t, secret.Data["ca.crt"], secret.Data["tls.crt"], secret.Data["tls.key"])
	sum := sha256.Sum256(secret.Data["tls.crt"])
	if got := d.Spec.Template.Annotations["checksum/tls"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum/tls %q is not the certificate's", got)
	}

	role := typed[rbacv1.ClusterRole](t, r.find(t, "ClusterRole", webhookName))
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
		t.Errorf("webhook ClusterRole (-want +got):\n%s", diff)
	}
	binding := typed[rbacv1.ClusterRoleBinding](t, r.find(t, "ClusterRoleBinding", webhookName))
	if binding.RoleRef.Name != webhookName || len(binding.Subjects) != 1 || binding.Subjects[0].Name != webhookName || binding.Subjects[0].Namespace != testRelease.Namespace {
		t.Errorf("webhook ClusterRoleBinding %+v does not bind its ServiceAccount", binding)
	}

	// The kubeconfig Secret the webhook writes its refreshed token to: that
	// Secret only, get and update.
	secretRole := typed[rbacv1.Role](t, r.find(t, "Role", webhookName+"-kubeconfig"))
	wantSecretRules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{kubeconfigSecret}, Verbs: []string{"get", "update"}}}
	if diff := cmp.Diff(wantSecretRules, secretRole.Rules); diff != "" || secretRole.Namespace != testRelease.Namespace {
		t.Errorf("webhook kubeconfig Role in %q (-want +got):\n%s", secretRole.Namespace, diff)
	}
	secretBinding := typed[rbacv1.RoleBinding](t, r.find(t, "RoleBinding", webhookName+"-kubeconfig"))
	if secretBinding.RoleRef.Kind != "Role" || secretBinding.RoleRef.Name != secretRole.Name || len(secretBinding.Subjects) != 1 || secretBinding.Subjects[0].Name != webhookName || secretBinding.Subjects[0].Namespace != testRelease.Namespace {
		t.Errorf("webhook kubeconfig RoleBinding %+v does not bind its ServiceAccount", secretBinding)
	}
}

// checkWebhookConfiguration checks what every mode shares.
func checkWebhookConfiguration(t *testing.T, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks; want 1", len(vwc.Webhooks))
	}
	w := vwc.Webhooks[0]
	path := "/validate"
	port := int32(443)
	fail, equivalent := admissionregistrationv1.Fail, admissionregistrationv1.Equivalent
	noneOnDryRun := admissionregistrationv1.SideEffectClassNoneOnDryRun
	timeout := int32(10)
	want := admissionregistrationv1.ValidatingWebhook{
		Name:                    "quota.miloapis.com",
		AdmissionReviewVersions: []string{"v1"},
		SideEffects:             &noneOnDryRun,
		FailurePolicy:           &fail,
		TimeoutSeconds:          &timeout,
		MatchPolicy:             &equivalent,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Name: webhookName, Namespace: testRelease.Namespace, Path: &path, Port: &port},
			CABundle: w.ClientConfig.CABundle,
		},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
			Values: []string{"kube-system", "kube-public", "kube-node-lease", testRelease.Namespace},
		}}},
		Rules: w.Rules,
	}
	if sel := w.ObjectSelector; sel != nil && len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		want.ObjectSelector = sel // the API server's default: every object
	}
	if diff := cmp.Diff(want, w); diff != "" {
		t.Errorf("webhook (-want +got):\n%s", diff)
	}
}

func checkServingCertificate(t *testing.T, caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the serving certificate and key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.crt holds no PEM certificate")
	}
	for _, name := range []string{webhookName + "." + testRelease.Namespace + ".svc", webhookName + "." + testRelease.Namespace + ".svc.cluster.local"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate does not verify for %s: %v", name, err)
		}
	}
}

// TestChartWebhookRules: rules and extra namespaces from values.
func TestChartWebhookRules(t *testing.T) {
	r := render(t, memberValues(map[string]any{"webhook": map[string]any{
		"rules": []any{map[string]any{"apiGroups": []any{"apps"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"},
			"resources": []any{"deployments"}, "scope": "Namespaced"}},
		"excludedNamespaces": []any{"monitoring", "kube-system"},
		"replicas":           1,
	}}))
	w := r.webhookConfiguration(t).Webhooks[0]
	scope := admissionregistrationv1.NamespacedScope
	want := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}, Scope: &scope},
	}}
	if diff := cmp.Diff(want, w.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if got, want := w.NamespaceSelector.MatchExpressions[0].Values, []string{"kube-system", "kube-public", "kube-node-lease", testRelease.Namespace, "monitoring"}; !slices.Equal(got, want) {
		t.Errorf("excluded namespaces %v; want %v", got, want)
	}
	if r.has("PodDisruptionBudget", webhookName) {
		t.Error("a PodDisruptionBudget of minAvailable 1 over one replica would block every drain")
	}
}

// TestChartCertManager: cert-manager issues the certificate; Helm makes
// none and leaves caBundle to the CA injector.
func TestChartCertManager(t *testing.T) {
	r := render(t, memberValues(map[string]any{"certManager": map[string]any{"enabled": true}}))
	if r.has("Secret", tlsSecretName) {
		t.Error("Helm renders the TLS Secret although cert-manager makes it")
	}
	for _, name := range []string{webhookName + "-selfsigned", webhookName + "-ca"} {
		if o := r.find(t, "Issuer", name); o.GetAPIVersion() != "cert-manager.io/v1" || o.GetNamespace() != testRelease.Namespace {
			t.Errorf("Issuer %s: %s in %q", name, o.GetAPIVersion(), o.GetNamespace())
		}
	}
	ca := r.find(t, "Certificate", webhookName+"-ca")
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA {
		t.Error("the CA Certificate is not isCA")
	}
	serving := r.find(t, "Certificate", webhookName+"-serving")
	if got, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName"); got != tlsSecretName {
		t.Errorf("serving Certificate writes %q; the webhook mounts %q", got, tlsSecretName)
	}
	if got, _, _ := unstructured.NestedString(serving.Object, "spec", "issuerRef", "name"); got != webhookName+"-ca" {
		t.Errorf("serving Certificate issued by %q; want the CA Issuer", got)
	}
	names, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	if !slices.Contains(names, webhookName+"."+testRelease.Namespace+".svc") {
		t.Errorf("serving Certificate names %v; want the Service's DNS name among them", names)
	}
	vwc := r.webhookConfiguration(t)
	checkWebhookConfiguration(t, vwc)
	if got, want := vwc.Annotations["cert-manager.io/inject-ca-from"], testRelease.Namespace+"/"+serving.GetName(); got != want {
		t.Errorf("inject-ca-from %q; want %q", got, want)
	}
	if len(vwc.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Error("caBundle is set although cert-manager injects it")
	}
	if _, ok := r.deployment(t, webhookName).Spec.Template.Annotations["checksum/tls"]; ok {
		t.Error("checksum/tls without a Helm-made certificate")
	}
}

// TestChartOwnCertificates: certificates.generate false renders neither the
// Secret nor caBundle unless caBundle is given.
func TestChartOwnCertificates(t *testing.T) {
	r := render(t, memberValues(map[string]any{"certificates": map[string]any{"generate": false}}))
	if r.has("Secret", tlsSecretName) || len(r.webhookConfiguration(t).Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Error("certificates.generate false still renders the Secret or a caBundle")
	}
	r = render(t, memberValues(map[string]any{"certificates": map[string]any{"generate": false, "caBundle": "Y2E="}}))
	if got := string(r.webhookConfiguration(t).Webhooks[0].ClientConfig.CABundle); got != "ca" {
		t.Errorf("caBundle %q; want the one given (decoded: ca)", got)
	}
}

// TestChartController: the quota engine for a cluster that is its own
// quota plane, without the webhook.
func TestChartController(t *testing.T) {
	r := render(t, map[string]any{"webhook": map[string]any{"enabled": false}, "controller": map[string]any{"enabled": true}})
	for _, o := range r {
		if o.GetLabels()["app.kubernetes.io/component"] == "webhook" || o.GetKind() == "ValidatingWebhookConfiguration" {
			t.Errorf("webhook object %s %s rendered with the webhook off", o.GetKind(), o.GetName())
		}
	}
	d := r.deployment(t, controllerName)
	checkPodSecurity(t, d)
	ctr := d.Spec.Template.Spec.Containers[0]
	if want := []string{"controller", "--metrics-bind-address=:8080", "--system-namespace=" + testRelease.Namespace}; !slices.Equal(ctr.Args, want) {
		t.Errorf("controller args %v; want %v", ctr.Args, want)
	}
	if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port != intstr.FromString("metrics") {
		t.Errorf("controller liveness probe %+v; want GET /healthz on metrics", p)
	}
	role := typed[rbacv1.ClusterRole](t, r.find(t, "ClusterRole", controllerName))
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{"quota.miloapis.com", "resourcemanager.miloapis.com"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, ResourceNames: []string{"quotaplane-organization-owner"}, Verbs: []string{"bind"}},
	} {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, want) }) {
			t.Errorf("controller ClusterRole lacks %+v", want)
		}
	}
	for _, rule := range role.Rules {
		if slices.Contains(rule.Verbs, "escalate") || (slices.Contains(rule.Verbs, "bind") && len(rule.ResourceNames) == 0) || (slices.Contains(rule.APIGroups, "*") && !slices.Equal(rule.Verbs, []string{"get", "list", "watch"})) {
			t.Errorf("controller ClusterRole rule %+v grants more than reading everything", rule)
		}
	}
	ns := typed[rbacv1.Role](t, r.find(t, "Role", controllerName))
	if ns.Namespace != testRelease.Namespace {
		t.Errorf("the controller's Role is in %q; want the system namespace %q", ns.Namespace, testRelease.Namespace)
	}
	for _, name := range []string{"quotaplane-organization-owner", "quotaplane-quota-admin"} {
		r.find(t, "ClusterRole", name)
	}
}
