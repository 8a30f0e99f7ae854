package existing

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
)

// resettable is a fixed RESTMapper: what discovery would say of Secrets.
type resettable struct{ *meta.DefaultRESTMapper }

func (resettable) Reset() {}

func secret(name, uid string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret"}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID(uid))
	return u
}

// TestPassCountsAcrossAttempts: a pass that finds an object busy tries
// again; the attempt after finds the objects the pass itself charged holding
// a claim, and counts them as charged, not as held — only an object charged
// before the pass (by its create) is reported as already holding one.
func TestPassCountsAcrossAttempts(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	target := quotav1alpha1.ClaimTarget{ResourceClaimTemplate: quotav1alpha1.ResourceClaimTemplate{
		Spec: quotav1alpha1.ResourceClaimTemplateSpec{
			ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "x.io/secrets", Amount: intstr.FromInt32(1)}},
		}}}
	trigger := quotav1alpha1.Trigger{Resource: quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}}
	cp := &quotav1alpha1.ClaimCreationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets", UID: "p-uid", Generation: 1},
		Spec:       quotav1alpha1.ClaimCreationPolicySpec{Trigger: trigger, Target: target},
		Status:     quotav1alpha1.ClaimCreationPolicyStatus{Enforced: &quotav1alpha1.EnforcedClaimPolicy{Generation: 1, Trigger: trigger, Target: target}},
	}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{secrets: "SecretList"},
		secret("charged-by-the-pass", "o1"), secret("busy-at-first", "o2"), secret("charged-by-its-create", "o3"))

	// What the engine's cache answers: the first attempt charges o1, finds
	// o2 busy and o3 holding a claim; the second finds o1 and o3 holding
	// one and charges o2.
	attempt := 0
	answers := []map[string]string{
		{"o1": "charged", "o2": "busy", "o3": "held"},
		{"o1": "held", "o2": "charged", "o3": "held"},
	}
	c := &Charger{
		Mapper:        resettable{mapper},
		Dynamic:       dyn,
		NamespaceOpen: func(context.Context, string) error { return nil },
		Client:        fake.NewClientBuilder().WithScheme(scheme).WithObjects(cp.DeepCopy()).WithStatusSubresource(cp).Build(),
		Charge: func(_ context.Context, _ string, claims []*quotav1alpha1.ResourceClaim) (admit.ExistingResult, error) {
			res := admit.ExistingResult{Refused: map[string]string{}}
			for _, cl := range claims {
				uid := cl.Annotations[quotav1alpha1.AnnotationResourceUID]
				switch answers[attempt][uid] {
				case "charged":
					res.Charged = append(res.Charged, cl.Namespace+"/"+cl.Name)
				case "busy":
					res.Busy = append(res.Busy, uid)
				case "held":
					res.Held = append(res.Held, uid)
				}
			}
			return res, nil
		},
	}
	p := c.pass(cp.Name, "v")
	busy, err := c.charge(ctx, cp, p)
	if err != nil || busy != 1 {
		t.Fatalf("first attempt: busy %d, err %v; want 1 busy (%d objects, %v)", busy, err, p.objects, p.reasons)
	}
	attempt++
	p = c.pass(cp.Name, "v")
	if busy, err = c.charge(ctx, cp, p); err != nil || busy != 0 {
		t.Fatalf("second attempt: busy %d, err %v; want none", busy, err)
	}
	if p.objects != 3 || p.charged != 2 || p.held != 1 || p.notCharged != 0 {
		t.Fatalf("pass: %d objects, %d charged, %d held, %d not charged; want 3, 2, 1, 0 (%v)", p.objects, p.charged, p.held, p.notCharged, p.reasons)
	}
	if err := c.report(ctx, cp, 1, "", p); err != nil {
		t.Fatal(err)
	}
	got := &quotav1alpha1.ClaimCreationPolicy{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: cp.Name}, got); err != nil {
		t.Fatal(err)
	}
	st := got.Status.ExistingObjects
	if st == nil || st.Charged != 2 || st.Objects != 3 || !strings.Contains(st.Message, "3 existing Secret objects examined for generation 1, 2 charged; 1 already held a claim of this policy") {
		t.Fatalf("status.existingObjects %+v; want 3 examined, 2 charged, 1 already held", st)
	}
}
