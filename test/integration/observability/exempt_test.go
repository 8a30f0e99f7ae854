package observability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// exemptByFlag is exempt by the server's --quota-exempt-namespaces.
const exemptByFlag = "exempt-by-flag"

// everyConfigMap is a ClaimCreationPolicy on every ConfigMap, anywhere,
// charging the fixture's organization, which has no grant: every charged
// create is refused. It is deleted when the test ends, and waited out.
func everyConfigMap(t *testing.T, f *quotatest.Fixture) *quotav1alpha1.ClaimCreationPolicy {
	t.Helper()
	f.RegisterClaimedBy([]string{"configmaps"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	p := f.PolicyObject("every-configmap", "v1", "ConfigMap", "configmaps", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = nil
	})
	if err := f.C.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.C.Delete(context.Background(), p)
		f.WaitPolicyNotInForce(corev1.SchemeGroupVersion.WithResource("configmaps"), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.NS}}, p.Name)
	})
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	return p
}

// refusedForQuota waits until create (a dry run) is refused for quota.
func refusedForQuota(t *testing.T, what string, create func(ctx context.Context, dryRun metav1.CreateOptions) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = create(ctx, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "Insufficient quota"), nil
	})
	if err != nil {
		t.Fatalf("%s is not refused for quota: %v", what, last)
	}
}

// TestQuotaplaneRecordsAreNeverGoverned (issue 33, hole 9): with a policy
// charging every ConfigMap and no grant, quotaplane keeps recording its
// decision history (ConfigMaps in its system namespace), ConfigMaps in
// kube-system are admitted, and an ordinary namespace is still charged.
func TestQuotaplaneRecordsAreNeverGoverned(t *testing.T) {
	ctx := context.Background()
	c := quotatest.NewClient(t, srv.Config)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	f := quotatest.NewFixture(t, c)
	p := everyConfigMap(t, f)
	refusedForQuota(t, "a ConfigMap in "+f.NS, func(ctx context.Context, o metav1.CreateOptions) error {
		_, err := kube.CoreV1().ConfigMaps(f.NS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}, o)
		return err
	})

	// A refusal is a decision: it goes into the organization's history, a
	// ConfigMap quotaplane creates in its system namespace.
	_, err := kube.CoreV1().ConfigMaps(f.NS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a ConfigMap in an ordinary namespace, with no grant: got %v, want refused for quota", err)
	}
	rows := readHistory(t, history.Query{ConsumerKind: f.Org.Kind, ConsumerName: f.Org.Name, ObjectKind: "ConfigMap", ObjectNamespace: f.NS, ObjectName: "refused"},
		hasEvent(history.AdmissionRefused))
	if r := rows[len(rows)-1]; r.Policy != p.Name {
		t.Errorf("the refusal is recorded with policy %q, want %q", r.Policy, p.Name)
	}
	// Nothing of quotaplane's own is charged.
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(engine.DefaultOptions().SystemNamespace), client.MatchingLabels{quotav1alpha1.LabelPolicy: quotav1alpha1.LabelValue(p.Name)}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) > 0 {
		t.Errorf("%d of quotaplane's own ConfigMaps were charged, e.g. %s", len(claims.Items), claims.Items[0].Name)
	}

	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", exemptByFlag} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		name := "not-governed-" + f.ID
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("a ConfigMap in %s: %v; the system namespaces are exempt by default, and %s by the server's flag", ns, err, exemptByFlag)
			continue
		}
		_ = kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	}
}

// TestLoopbackWritesForATenantAreCharged: the exemption is by namespace,
// never by identity. An Organization's namespace is created by serve's own
// controller (its loopback identity) on the tenant's behalf: a policy
// governing it, with no grant, refuses it, and the Organization says why.
func TestLoopbackWritesForATenantAreCharged(t *testing.T) {
	ctx := context.Background()
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	f.RegisterClaimedBy([]string{"namespaces"}, quotav1alpha1.ClaimingResource{Kind: "Namespace"})
	name := "loop-" + f.ID
	p := f.PolicyObject("namespaces", "v1", "Namespace", "namespaces", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.name == %q", rmv1alpha1.OrganizationNamespace(name))}}
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = f.NS
	})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	refusedForQuota(t, "namespace "+rmv1alpha1.OrganizationNamespace(name), func(ctx context.Context, o metav1.CreateOptions) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rmv1alpha1.OrganizationNamespace(name)}}, o)
		return err
	})
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	if err := c.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	var ready *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return false, nil
		}
		ready = meta.FindStatusCondition(o.Status.Conditions, rmv1alpha1.ConditionReady)
		return ready != nil && strings.Contains(ready.Message, "Insufficient quota"), nil
	})
	if err != nil {
		t.Fatalf("the organization's namespace, created by serve's loopback for the tenant, was not refused for quota: Ready %+v", ready)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: rmv1alpha1.OrganizationNamespace(name)}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s: %v, want not found", rmv1alpha1.OrganizationNamespace(name), err)
	}
}

// TestFailedRecordIsCounted: a record quotaplane cannot write is counted
// in milo_quota_records_dropped_total{record="history"} (and logged as an
// error). The write is made to fail for real: a ValidatingAdmissionPolicy
// refuses history ConfigMaps.
func TestFailedRecordIsCounted(t *testing.T) {
	ctx := context.Background()
	c := quotatest.NewClient(t, srv.Config)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	f := quotatest.NewFixture(t, c)
	f.SecretsPolicy(1)
	name := "refuse-history-" + f.ID
	fail := admissionregistrationv1.Deny
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptrTo(admissionregistrationv1.Fail),
		MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
		Validations: []admissionregistrationv1.Validation{{Expression: fmt.Sprintf("!object.metadata.name.startsWith('quota-history') || !(%q in object.metadata.annotations) || !object.metadata.annotations[%q].contains(%q)",
			history.AnnotationConsumer, history.AnnotationConsumer, f.Org.Name), Message: "refused by the test"}}}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{fail}}}
	vaps := kube.AdmissionregistrationV1()
	if _, err := vaps.ValidatingAdmissionPolicies().Create(ctx, vap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vaps.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := vaps.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vaps.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	dropped := func() float64 {
		for _, s := range scrape(t)["milo_quota_records_dropped_total"] {
			if labelValue(s.Metric, "record") == "history" {
				return float64(s.Value)
			}
		}
		return 0
	}
	before := dropped()
	// Each Secret is a decision of the organization's history; the first
	// ones may be written before the admission policy applies.
	var last float64
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, _ = kube.CoreV1().Secrets(f.NS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "s-"}}, metav1.CreateOptions{})
		last = dropped()
		return last > before, nil
	})
	if err != nil {
		t.Fatalf("milo_quota_records_dropped_total{record=\"history\"} stayed at %v while the history could not be written", last)
	}
}

func ptrTo[T any](v T) *T { return &v }
