package walk

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// TestClaimForExemptAndPlaneConsumers: a walk leaves exempt objects
// alone as admission does (the system namespace, kube-system; not a plane's
// kube-system), and never charges a plane's object to a Namespace consumer,
// which would be the root's (governed.PlaneConsumer), saying why.
func TestClaimForExemptAndPlaneConsumers(t *testing.T) {
	cp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	cp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
	cp.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "x.io/secrets", Amount: intstr.FromInt32(1)}}}
	compiled, err := policy.Compile(cp, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := &Walker{SystemNamespace: "quotaplane-system", NamespaceOpen: func(context.Context, string) error { return nil },
		Exemptions: governed.NewExemptions("quotaplane-system", governed.DefaultExemptNamespaces)}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	k := Kind{GVR: gvr, GVK: gvr.GroupVersion().WithKind("Secret")}
	web := &planes.Plane{Kind: planes.Projects, Name: "web"}
	for _, tc := range []struct {
		ns      string
		plane   *planes.Plane
		charged bool
		why     string
	}{
		{ns: "default", charged: true},
		{ns: "quotaplane-system"},
		{ns: "kube-system"},
		{ns: "default", plane: web, why: "not the root's Namespace default"},
		{ns: "kube-system", plane: web, why: "not the root's Namespace kube-system"},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret"}}
		obj.SetNamespace(tc.ns)
		obj.SetName("s")
		obj.SetUID("u")
		claim, refused := w.ClaimFor(context.Background(), Version{Name: cp.Name, Generation: 1}, compiled, k, tc.plane, obj, map[string]error{})
		why := ""
		if refused != nil {
			why = refused.Why
		}
		if (claim != nil) != tc.charged || !strings.Contains(why, tc.why) || (tc.why == "" && why != "") {
			t.Errorf("a Secret in %s (plane %v): claim %v, why %q; want charged %v, why %q", tc.ns, tc.plane, claim != nil, why, tc.charged, tc.why)
		}
	}
}
