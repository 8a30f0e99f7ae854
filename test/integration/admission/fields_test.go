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
	"k8s.io/client-go/rest"
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

// TestAMisspeltFieldIsAWarning: a policy reading a field its trigger kind
// does not have in any served version — applied right after the CRD, as
// one `kubectl apply` would — is stored with a warning naming the policy's
// field path, the expression's field and the nearest real field, as
// Kubernetes' ValidatingAdmissionPolicy type-checks; it is Ready, with the
// warning in status.typeChecking and on the TypeChecked condition; a create
// lacking the field is refused at admission, naming it. A field only one
// served version has gives no warning; a built-in kind's fields are checked
// the same way, and so is a misspelt trigger kind.
func TestAMisspeltFieldIsAWarning(t *testing.T) {
	ctx := context.Background()
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, gizmoCRD(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	warned := &quotatest.Warnings{}
	cfg := rest.CopyConfig(srv.Config)
	cfg.WarningHandler = warned
	f := quotatest.NewFixture(t, quotatest.NewClient(t, cfg))
	f.RegisterClaimedBy([]string{"secrets"}, append(claimingKinds, quotav1alpha1.ClaimingResource{APIGroup: "fields.example.com", Kind: "Gizmo"})...)
	f.Limit = 100
	f.Grant("g", map[string][]quotatest.Bucket{"secrets": {{Amount: 100}}})
	w := &world{f}
	amountField := "spec.target.resourceClaimTemplate.spec.requests[0].amount"
	warned.Reset()
	typo := w.Policy("typo", "fields.example.com/v1", "Gizmo", "secrets", intstr.FromString("{{ trigger.spec.cpuz }}"))
	if !warned.Contains(amountField+": ") || !warned.Contains("did you mean cpus?") {
		// The create's warning needs the kind's schema, which a CRD just
		// created may not publish yet; the status below always says it.
		t.Logf("the create was not warned (the CRD's schema was not published yet?): %s", warned.String())
	}
	wantTypeChecked(t, w, typo, amountField, "reads trigger.spec.cpuz, a field Gizmo does not have", "did you mean cpus?")
	gizmos := dynamic.NewForConfigOrDie(srv.Config).Resource(schema.GroupVersionResource{Group: "fields.example.com", Version: "v1", Resource: "gizmos"}).Namespace(w.NS)
	object := func(name string, cpus int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "fields.example.com/v1", "kind": "Gizmo",
			"metadata": map[string]any{"name": name, "namespace": w.NS},
			"spec":     map[string]any{"cpus": cpus, "memoryGiB": int64(1)},
		}}
	}
	_, err := gizmos.Create(ctx, object("lacks-cpuz", 4), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "cpuz") {
		t.Errorf("a Gizmo without the field the Ready policy reads: %v; want it refused naming cpuz", err)
	}
	if n := len(w.claims()); n != 0 {
		t.Errorf("a refused Gizmo made %d claims", n)
	}
	// Corrected, the warning goes, and so does the condition.
	if err := w.C.Get(ctx, client.ObjectKeyFromObject(typo), typo); err != nil {
		t.Fatal(err)
	}
	typo.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].Amount = intstr.FromString("{{ trigger.spec.cpus }}")
	if err := w.C.Update(ctx, typo); err != nil {
		t.Fatal(err)
	}
	wantTypeChecked(t, w, typo, "")
	if err := w.C.Delete(ctx, typo); err != nil {
		t.Fatal(err)
	}

	// A field of one served version only: no warning.
	warned.Reset()
	p := w.Policy("gpus", "fields.example.com/v1", "Gizmo", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "has(trigger.spec.gpus)"})
	})
	wantTypeChecked(t, w, p, "")
	if err := w.C.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}

	// A built-in kind: a ConfigMap has no spec and no status; the
	// reference's ConfigMap policies read both.
	warned.Reset()
	cm := w.Policy("configmap", "v1", "ConfigMap", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: "trigger.dat.size() > 0"})
	})
	if !warned.Contains("spec.trigger.constraints[1].expression: ") || !warned.Contains("did you mean data?") {
		t.Errorf("creating a ConfigMap policy reading trigger.dat warned %q; want the field path and \"did you mean data?\"", warned.String())
	}
	wantTypeChecked(t, w, cm, "spec.trigger.constraints[1].expression", `"trigger.dat.size() > 0" reads trigger.dat`, "did you mean data?")
	if err := w.C.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}

	// A misspelt trigger kind: warned, Ready, reported.
	warned.Reset()
	kind := w.Policy("kind", "v1", "ConfigMapp", "secrets", intstr.FromInt32(1))
	if !warned.Contains("spec.trigger.resource.kind: kind ConfigMapp (apiVersion v1) is not served: did you mean ConfigMap?") {
		t.Errorf("creating a policy for kind ConfigMapp warned %q; want it named, with the nearest kind", warned.String())
	}
	wantTypeChecked(t, w, kind, "spec.trigger.resource.kind", "did you mean ConfigMap?")
	if err := w.C.Delete(ctx, kind); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// wantTypeChecked waits for a Ready policy's status.typeChecking to hold
// one warning on field saying each of says, with the TypeChecked condition
// False; with no field, for neither to be there.
func wantTypeChecked(t *testing.T, w *world, p *quotav1alpha1.ClaimCreationPolicy, field string, says ...string) {
	t.Helper()
	ctx := context.Background()
	var got quotav1alpha1.ClaimCreationPolicy
	ok := func() bool {
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil || got.Status.ObservedGeneration != got.Generation {
			return false
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.PolicyConditionReady) {
			return false
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, quotav1alpha1.PolicyConditionTypeChecked)
		if field == "" {
			return got.Status.TypeChecking == nil && cond == nil
		}
		tc := got.Status.TypeChecking
		if tc == nil || len(tc.ExpressionWarnings) != 1 || tc.ExpressionWarnings[0].FieldRef != field || cond == nil || cond.Status != metav1.ConditionFalse {
			return false
		}
		for _, s := range says {
			if !strings.Contains(tc.ExpressionWarnings[0].Warning, s) || !strings.Contains(cond.Message, s) {
				return false
			}
		}
		return true
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("policy %s: status.typeChecking %+v, conditions %+v; want a warning on %q saying %q", p.Name, got.Status.TypeChecking, got.Status.Conditions, field, says)
	}
}
