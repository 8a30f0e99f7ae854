package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// gizmoCRD serves Gizmo in two versions with closed schemas: v1 has
// spec.cpus and spec.memoryGiB, v2 adds spec.gpus.
func gizmoCRD() *apiextensionsv1.CustomResourceDefinition {
	version := func(name string, storage bool, fields ...string) apiextensionsv1.CustomResourceDefinitionVersion {
		props := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, f := range fields {
			props[f] = apiextensionsv1.JSONSchemaProps{Type: "integer"}
		}
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: props}},
			}}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.fields.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "fields.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				version("v1", true, "cpus", "memoryGiB"),
				version("v2", false, "cpus", "memoryGiB", "gpus"),
			},
		},
	}
}

// TestAMisspeltFieldIsAValidationFailure: a policy reading a field its
// trigger kind does not have in any served version — applied right after
// the CRD, as one `kubectl apply` would — is ValidationFailed naming the
// policy's field path, the expression's field and the nearest real field;
// it is not enforced, so Gizmos are created freely; an edit of a Ready
// policy that misspells a field leaves the last valid generation enforced;
// a field only one served version has is accepted. A built-in kind's
// fields are checked the same way.
func TestAMisspeltFieldIsAValidationFailure(t *testing.T) {
	ctx := context.Background()
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gizmoCRD(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"secrets"}, append(claimingKinds, quotav1alpha1.ClaimingResource{APIGroup: "fields.example.com", Kind: "Gizmo"})...)
	f.Limit = 100
	f.Grant("g", map[string][]quotatest.Bucket{"secrets": {{Amount: 100}}})
	w := &world{f}
	typo := w.Policy("typo", "fields.example.com/v1", "Gizmo", "secrets", intstr.FromString("{{ trigger.spec.cpuz }}"))
	c := w.WaitPolicyReady(typo, metav1.ConditionFalse)
	for _, want := range []string{"spec.target.resourceClaimTemplate.spec.requests[0].amount: ", "{{ trigger.spec.cpuz }}",
		"reads trigger.spec.cpuz, a field Gizmo does not have", "did you mean cpus?", "not enforced"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Ready message %q lacks %q", c.Message, want)
		}
	}
	if c.Reason != "ValidationFailed" {
		t.Errorf("reason %s, want ValidationFailed", c.Reason)
	}
	gizmos := dynamic.NewForConfigOrDie(srv.Config).Resource(schema.GroupVersionResource{Group: "fields.example.com", Version: "v1", Resource: "gizmos"}).Namespace(w.NS)
	object := func(name string, cpus int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "fields.example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name, "namespace": w.NS},
			"spec":     map[string]any{"cpus": cpus, "memoryGiB": int64(1)},
		}}
	}
	gizmo := func(name string, cpus int64) error {
		_, err := gizmos.Create(ctx, object(name, cpus), metav1.CreateOptions{})
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return gizmo("free", 4) == nil, nil
	}); err != nil {
		t.Fatalf("a Gizmo under a policy that is not enforced: %v", gizmo("free", 4))
	}
	if n := len(w.claims()); n != 0 {
		t.Errorf("a policy that failed validation made %d claims", n)
	}
	if err := w.C.Delete(ctx, typo); err != nil {
		t.Fatal(err)
	}

	// A valid policy, then an edit that misspells a field: the last valid
	// generation stays enforced.
	p := w.Policy("cpus", "fields.example.com/v1", "Gizmo", "secrets", intstr.FromString("{{ trigger.spec.cpus }}"), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "!has(trigger.spec.gpus)"})
	})
	w.WaitPolicyReady(p, metav1.ConditionTrue, object("probe", 1))
	p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].Amount = intstr.FromString("{{ trigger.spec.memoryGB }}")
	if err := w.C.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The last valid generation stays in force: wait on the condition alone.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.PolicyConditionReady)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.ObservedGeneration != p.Generation {
			return false, nil
		}
		c = *cond
		return true, nil
	}); err != nil {
		t.Fatalf("the misspelt edit never made the policy Ready=False: %+v", p.Status.Conditions)
	}
	for _, want := range []string{"trigger.spec.memoryGB", "did you mean memoryGiB?", "the last valid one, stays enforced"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Ready message %q lacks %q", c.Message, want)
		}
	}
	if err := gizmo("charged", 3); err != nil {
		t.Fatal(err)
	}
	// The claim is written once the Gizmo is stored, a moment after the
	// create is answered.
	var claims []quotav1alpha1.ResourceClaim
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		claims = w.claims()
		return len(claims) > 0, nil
	})
	if len(claims) != 1 || claims[0].Spec.Requests[0].Amount != 3 {
		t.Errorf("under the last valid generation a Gizmo of 3 cpus made claims %+v, want one of 3", claims)
	}

	// A built-in kind: a ConfigMap has no spec.
	cm := w.Policy("configmap", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "trigger.dat.size() > 0"})
	})
	c = w.WaitPolicyReady(cm, metav1.ConditionFalse)
	for _, want := range []string{"spec.trigger.constraints[1].expression: ", `"trigger.dat.size() > 0" reads trigger.dat`, "did you mean data?"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Ready message %q lacks %q", c.Message, want)
		}
	}
	if err := w.C.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}
