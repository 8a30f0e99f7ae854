// Package updates tests that quota follows an object through its updates:
// resized up and down, scaled through its scale subresource, relabelled in
// and out of a policy, against the real server.
package updates

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}

var gadgetsGVR = schema.GroupVersionResource{Group: "updates.example.com", Version: "v1", Resource: "gadgets"}

// installGadgets installs the Gadget CRD: spec.cpus, spec.replicas (its scale
// subresource), spec.memory (a quantity), and a status subresource.
func installGadgets(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	intProp := apiextensionsv1.JSONSchemaProps{Type: "integer"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets.updates.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "updates.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"cpus": intProp, "replicas": intProp, "memory": {Type: "string"}, "note": {Type: "string"},
						}},
						"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": intProp, "extra": intProp,
						}},
					},
				}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
				},
			}},
		},
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(srv.Config)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dc.Resource(gadgetsGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		t.Fatal("the Gadget CRD is not served")
	}
}

// world is a fixture with the Gadget CRD and a policy charging each Gadget
// cpus × replicas (+ status.extra, which only a status update can set) of
// the resource type "cpus".
type world struct {
	*quotatest.Fixture
	dc     dynamic.ResourceInterface
	policy *quotav1alpha1.ClaimCreationPolicy
}

const cpusAmount = "{{ trigger.spec.cpus * (has(trigger.spec.replicas) ? trigger.spec.replicas : 1) + (has(trigger.status) && has(trigger.status.extra) ? trigger.status.extra : 0) }}"

func newWorld(t *testing.T, limit int64) *world {
	t.Helper()
	installGadgets(t)
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	claiming := quotav1alpha1.ClaimingResource{APIGroup: "updates.example.com", Kind: "Gadget"}
	f.RegisterClaimedBy([]string{"cpus", "gold"}, claiming)
	f.Limit = limit
	f.Grant("g", map[string][]quotatest.Bucket{"cpus": {{Amount: limit}}, "gold": {{Amount: 5}}})
	w := &world{Fixture: f, dc: dynamic.NewForConfigOrDie(srv.Config).Resource(gadgetsGVR).Namespace(f.NS)}
	w.policy = f.Policy("cpus", "updates.example.com/v1", "Gadget", "cpus", intstr.FromString(cpusAmount))
	f.WaitPolicyReady(w.policy, metav1.ConditionTrue, w.probe())
	return w
}

// probe is the gadget whose dry-run create shows a policy in force.
func (w *world) probe() *unstructured.Unstructured {
	g := gadget("in-force-probe", 1)
	g.SetNamespace(w.NS)
	return g
}

func gadget(name string, cpus int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "updates.example.com/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"cpus": cpus},
	}}
}

func (w *world) create(name string, cpus int64) {
	w.T.Helper()
	if _, err := w.dc.Create(context.Background(), gadget(name, cpus), metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("creating gadget %s: %v", name, err)
	}
}

// patch merges spec fields into a gadget.
func (w *world) patch(name string, spec map[string]any, subresources ...string) error {
	body := fmt.Sprintf(`{"spec":%s}`, jsonOf(spec))
	_, err := w.dc.Patch(context.Background(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresources...)
	return err
}

func jsonOf(m map[string]any) string {
	var parts []string
	for k, v := range m {
		switch x := v.(type) {
		case string:
			parts = append(parts, fmt.Sprintf("%q:%q", k, x))
		default:
			parts = append(parts, fmt.Sprintf("%q:%v", k, x))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (w *world) get(name string) *unstructured.Unstructured {
	w.T.Helper()
	u, err := w.dc.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	return u
}

// claimsOf lists the claims made for a gadget.
func (w *world) claimsOf(name string) []quotav1alpha1.ResourceClaim {
	w.T.Helper()
	u, err := w.dc.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.C.List(context.Background(), list, client.InNamespace(w.NS)); err != nil {
		w.T.Fatal(err)
	}
	var out []quotav1alpha1.ResourceClaim
	for _, c := range list.Items {
		if c.Annotations[quotav1alpha1.AnnotationResourceUID] == string(u.GetUID()) {
			out = append(out, c)
		}
	}
	return out
}

// held sums what a gadget's claims of resource type rt hold.
func (w *world) held(name, rt string) int64 {
	var n int64
	for _, c := range w.claimsOf(name) {
		for _, r := range c.Spec.Requests {
			if string(r.ResourceType) == string(w.RT(rt)) {
				n += r.Amount
			}
		}
	}
	return n
}

// waitHeld waits until a gadget's claims of rt hold want, in one claim.
func (w *world) waitHeld(name, rt string, want int64) {
	w.T.Helper()
	var got int64
	var claims int
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = w.held(name, rt)
		claims = 0
		for _, c := range w.claimsOf(name) {
			if c.Spec.Requests[0].ResourceType == w.RT(rt) {
				claims++
			}
		}
		return got == want && (want == 0) == (claims == 0) && claims <= 1, nil
	}); err != nil {
		w.T.Fatalf("gadget %s holds %d of %s in %d claims, want %d in one", name, got, rt, claims, want)
	}
}

func spec(u *unstructured.Unstructured, field string) int64 {
	v, _, _ := unstructured.NestedInt64(u.Object, "spec", field)
	return v
}

func ptrQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
