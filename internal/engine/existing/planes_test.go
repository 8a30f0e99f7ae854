package existing

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// TestPlanesObjectsCharged: a pass lists the trigger kind in every served
// plane as at the root, renders each plane object's claim as admission would
// there (its quota namespace, the owner charged, the plane marked), and names
// the planes it could not examine.
func TestPlanesObjectsCharged(t *testing.T) {
	ctx := context.Background()
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	fakeOf := func(objs ...runtime.Object) dynamic.Interface {
		return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{secrets: "SecretList"}, objs...)
	}
	target := quotav1alpha1.ClaimTarget{ResourceClaimTemplate: quotav1alpha1.ResourceClaimTemplate{
		Spec: quotav1alpha1.ResourceClaimTemplateSpec{Requests: []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "x.io/secrets", Amount: intstr.FromInt32(1)}}}}}
	trigger := quotav1alpha1.Trigger{Resource: quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}}
	cp := &quotav1alpha1.ClaimCreationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "secrets", UID: "p-uid", Generation: 1},
		Spec:       quotav1alpha1.ClaimCreationPolicySpec{Trigger: trigger, Target: target},
		Status:     quotav1alpha1.ClaimCreationPolicyStatus{Enforced: &quotav1alpha1.EnforcedClaimPolicy{Generation: 1, Trigger: trigger, Target: target}},
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	web := planes.Plane{Kind: planes.Projects, Name: "web", UID: "web-uid"}
	planeObjects := map[string]dynamic.Interface{web.String(): fakeOf(secret("a", "w1"), secret("b", "w2"))}
	var charged []*quotav1alpha1.ResourceClaim
	c := &Charger{
		Mapper:        resettable{mapper},
		Dynamic:       fakeOf(secret("at-root", "r1")),
		NamespaceOpen: func(context.Context, string) error { return nil },
		Planes: func(context.Context) ([]planes.Listed, error) {
			return []planes.Listed{{Plane: web, Served: true},
				{Plane: planes.Plane{Kind: planes.Projects, Name: "idle"}, NotServed: "its owner is not Ready"}}, nil
		},
		PlaneDynamic: func(p planes.Plane) (dynamic.Interface, error) { return planeObjects[p.String()], nil },
		Charge: func(_ context.Context, _ string, claims []*quotav1alpha1.ResourceClaim) (admit.ExistingResult, error) {
			res := admit.ExistingResult{Refused: map[string]string{}}
			for _, cl := range claims {
				charged = append(charged, cl)
				res.Charged = append(res.Charged, cl.Namespace+"/"+cl.Name)
			}
			return res, nil
		},
	}
	p := c.pass(cp.Name, "v")
	if busy, err := c.charge(ctx, cp, p); err != nil || busy != 0 {
		t.Fatalf("busy %d, err %v", busy, err)
	}
	// The root's Secret names no consumer (the template has none, and the
	// root belongs to no project): not charged. The plane's two are.
	if p.objects != 3 || p.charged != 2 || p.notCharged != 1 || len(charged) != 2 {
		t.Fatalf("%d objects, %d charged, %d not charged; want 3, 2, 1 (%v)", p.objects, p.charged, p.notCharged, p.reasons)
	}
	want := quotav1alpha1.ConsumerRef{APIGroup: planes.Group, Kind: "Project", Name: "web"}
	for _, cl := range charged {
		if cl.Namespace != "project-web" || cl.Annotations[planes.Annotation] != "projects/web" || cl.Spec.ConsumerRef != want {
			t.Errorf("claim %s/%s: annotation %q, consumer %+v; want it in project-web, marked projects/web, charging %+v",
				cl.Namespace, cl.Name, cl.Annotations[planes.Annotation], cl.Spec.ConsumerRef, want)
		}
	}
	if len(p.unexamined) != 1 || !strings.Contains(p.unexamined[0], "projects/idle") {
		t.Errorf("planes not examined: %v; want projects/idle named", p.unexamined)
	}
}
