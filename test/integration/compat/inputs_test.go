package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestReferenceResourceTypeAccepted: a resource type of any 1-253
// characters, such as the reference's compute_cpu, is registered (with a
// warning recommending group/name), granted and claimed.
func TestReferenceResourceTypeAccepted(t *testing.T) {
	c, warned := clientWithWarnings(t)
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	rt := "compute_cpu_" + strings.ReplaceAll(f.ID, "-", "_")
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-cpu"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind},
		Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "millicore",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}},
	}}
	if err := c.Create(ctx, reg); err != nil {
		t.Fatalf("registering resource type %q (accepted by the reference): %v", rt, err)
	}
	if !warned.Contains("has no group") {
		t.Errorf("registering %q: no warning recommending <group>/<resource>; got %q", rt, warned.All())
	}
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: f.Org, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: 2000}}}}}}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	cl := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "cpu", Namespace: f.NS}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: f.Org, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: 500}}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if d := f.Decided("cpu"); d.Status != metav1.ConditionTrue {
		t.Fatalf("a claim of %s was not granted: %+v", rt, d)
	}
}

// TestReferencePolicyInputsAccepted: a ClaimCreationPolicy as the reference
// takes it — no consumerRef, no disabled, the reference's template grammar —
// is stored and Ready; disabled reads false; its claims render as the
// reference renders them; without a consumerRef a create at the root is
// refused naming the policy.
func TestReferencePolicyInputsAccepted(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	f.RegisterClaimedBy([]string{"maps"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	f.Grant("maps", map[string][]quotatest.Bucket{"maps": {{Amount: 5}}})

	withRef := f.Policy("grammar", "v1", "ConfigMap", "maps", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: `trigger.has("metadata.labels.grammar")`})
		md := &p.Spec.Target.ResourceClaimTemplate.Metadata
		md.Name = `{{ trigger.metadata.name }}-{{ }}c{{ "a}}b" == "a}}b" ? "x" : "y" }}`
		md.Annotations = map[string]string{
			"example.com/literal": "{{{not an expression}}}",
			"example.com/sized":   `{{ trigger.has("data.size") ? "sized" : "unsized" }}`,
			"example.com/request": `{{ requestInfo.isResourceRequest ? requestInfo.path : "none" }}`,
			"example.com/parts":   `{{ requestInfo.parts.join("/") }}`,
		}
	})
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.NS, Labels: map[string]string{"grammar": "yes"}}}
	f.WaitPolicyReady(withRef, metav1.ConditionTrue, probe)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(quotav1alpha1.SchemeGroupVersion.WithKind("ClaimCreationPolicy"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(withRef), u); err != nil {
		t.Fatal(err)
	}
	if v, found, _ := unstructured.NestedBool(u.Object, "spec", "disabled"); !found || v {
		t.Fatalf("spec.disabled of a policy created without it reads %v (present %v), want false as the reference defaults it", v, found)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: f.NS, Labels: map[string]string{"grammar": "yes"}}, Data: map[string]string{"size": "1"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	claim := &quotav1alpha1.ResourceClaim{}
	eventually(t, "the claim named by the reference's grammar (m1-cx)", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: "m1-cx"}, claim)
		return err == nil, err
	})
	path := "/api/v1/namespaces/" + f.NS + "/configmaps"
	for k, want := range map[string]string{
		"example.com/literal": "{{{not an expression}}}", "example.com/sized": "sized",
		"example.com/request": path, "example.com/parts": "configmaps",
	} {
		if got := claim.Annotations[k]; got != want {
			t.Errorf("claim annotation %s = %q, want %q", k, got, want)
		}
	}

	// No consumerRef: stored and Ready; at the root, refused naming it. An
	// object that existed before it cannot be charged either, and the
	// policy's status says so.
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "noref-0", Namespace: f.NS}}); err != nil {
		t.Fatal(err)
	}
	noRef := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-noref"}}
	noRef.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	noRef.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q && trigger.metadata.name.startsWith('noref')", f.NS)}}
	noRef.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: string(f.RT("maps")), Amount: intstr.FromInt32(1)}}
	if err := c.Create(ctx, noRef); err != nil {
		t.Fatalf("a policy without consumerRef (accepted by the reference): %v", err)
	}
	f.WaitCondition(noRef, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	eventually(t, "the existing object reported not charged for want of a consumerRef", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(noRef), noRef); err != nil {
			return false, err
		}
		e := noRef.Status.ExistingObjects
		return e != nil && e.NotCharged == 1 && strings.Contains(e.Message, "has no spec.target.resourceClaimTemplate.spec.consumerRef"), fmt.Errorf("%+v", e)
	})
	eventually(t, "a create at the root under a policy without consumerRef is refused naming it", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "noref-1", Namespace: f.NS}}, client.DryRunAll)
		if err == nil {
			return false, fmt.Errorf("admitted")
		}
		return strings.Contains(err.Error(), "ClaimCreationPolicy "+noRef.Name) && strings.Contains(err.Error(), "consumerRef"), err
	})
}

// TestReferenceTenancyRules: an Organization's type is immutable and a
// Project's name is at most 55 characters, as in the reference.
func TestReferenceTenancyRules(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	ctx := context.Background()
	org := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: "compat-org"}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	if err := c.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(org), org); err != nil {
			return err
		}
		org.Spec.Type = rmv1alpha1.OrganizationTypePersonal
		return c.Update(ctx, org)
	})
	mustContain(t, err, "spec.type", "spec.type is immutable")
	for n, ok := range map[int]bool{55: true, 56: false} {
		p := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("p", n)},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org.Name}}}
		err := c.Create(ctx, p, client.DryRunAll)
		if ok && err != nil {
			t.Errorf("a project named with %d characters: %v", n, err)
		}
		if !ok {
			mustContain(t, err, "metadata.name must be at most 55 characters")
		}
	}
}
