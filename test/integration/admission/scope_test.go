package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// TestANamespaceSelectorScopesAPolicy: as ResourceQuota users scope quota
// by namespace, a policy's spec.trigger.namespaceSelector charges the
// objects of the namespaces it selects and no others; set, it replaces the
// default exemption of kube-* namespaces (a selector naming kube-public
// charges there); a GrantCreationPolicy refuses one, and an invalid
// selector is refused on its field.
func TestANamespaceSelectorScopesAPolicy(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 100)
	key := "quota.example.com/metered-" + w.ID
	in, out := "metered-"+w.ID, "free-"+w.ID
	for ns, labels := range map[string]map[string]string{in: {key: "yes"}, out: nil} {
		if err := w.C.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
	}
	// The fixture's policies charge its namespace alone; these charge
	// wherever their selector says, keeping the claims in the fixture's.
	anywhere := func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = nil
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = w.NS
	}
	configMap := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	p := w.Policy("scoped", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}
		anywhere(p)
	})
	if p.Spec.Trigger.NamespaceSelector == nil {
		t.Fatalf("the stored policy has no namespace selector: %+v", p.Spec.Trigger)
	}
	w.WaitPolicyReady(p, metav1.ConditionTrue, configMap(in, "probe"))
	claimsOf := func(name string) int {
		n := 0
		for _, c := range w.claims() {
			if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Name == name {
				n++
			}
		}
		return n
	}
	waitClaims := func(name string, want int) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return claimsOf(name) == want, nil
		}); err != nil {
			t.Errorf("ConfigMap %s has %d claims; want %d", name, claimsOf(name), want)
		}
	}
	for _, tc := range []struct{ ns, name string }{{out, "not-metered"}, {in, "metered"}} {
		if err := w.C.Create(ctx, configMap(tc.ns, tc.name)); err != nil {
			t.Fatalf("ConfigMap %s/%s: %v", tc.ns, tc.name, err)
		}
	}
	waitClaims("metered", 1)
	time.Sleep(500 * time.Millisecond) // a claim for the other would be written by now
	if n := claimsOf("not-metered"); n != 0 {
		t.Errorf("a ConfigMap in namespace %s, which the selector does not select, has %d claims", out, n)
	}

	// Set, the selector replaces the default exemption: one naming
	// kube-public charges there.
	named := w.Policy("kube-public", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: governed.NameLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-public"}}}}
		anywhere(p)
	})
	w.WaitPolicyReady(named, metav1.ConditionTrue, configMap("kube-public", "probe"))
	cm := configMap("kube-public", "metered-"+w.ID)
	if err := w.C.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.C.Delete(context.Background(), cm) })
	waitClaims(cm.Name, 1)

	// Refused: an invalid selector, and a selector on a GrantCreationPolicy.
	bad := w.PolicyObject("bad", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: "Is", Values: []string{"yes"}}}}
	})
	err := w.C.Create(ctx, bad)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.trigger.namespaceSelector") {
		t.Errorf("a policy with the selector operator Is: %v; want 422 on spec.trigger.namespaceSelector", err)
	}
	gp := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.ID + "-scoped"}, Spec: quotav1alpha1.GrantCreationPolicySpec{
		Trigger: quotav1alpha1.Trigger{Resource: quotav1alpha1.TriggerResource{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Organization"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: "yes"}}},
		Target: quotav1alpha1.GrantTarget{ResourceGrantTemplate: quotav1alpha1.ResourceGrantTemplate{
			Metadata: quotav1alpha1.TemplateMetadata{Name: "g-{{ trigger.metadata.name }}", Namespace: w.NS},
			Spec: quotav1alpha1.ResourceGrantTemplateSpec{ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "{{ trigger.metadata.name }}"},
				Allowances: []quotav1alpha1.GrantTemplateAllowance{{ResourceType: w.RT("secrets"), Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: 1}}}}}}}}}
	err = w.C.Create(ctx, gp)
	if err == nil {
		t.Cleanup(func() { _ = w.C.Delete(context.Background(), gp) })
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.trigger.namespaceSelector") || !strings.Contains(err.Error(), "cluster-scoped") {
		t.Errorf("a GrantCreationPolicy with a namespace selector: %v; want 422 on spec.trigger.namespaceSelector", err)
	}
}
