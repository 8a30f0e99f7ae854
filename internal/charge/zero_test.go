package charge

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// TestARequestOfZeroIsNotRendered: the render step every way in shares
// (Evaluate, then RenderClaim) leaves a request of 0 out of the claim, which
// the API server then accepts (its schema wants at least 1), and renders no
// claim when every request is 0.
func TestARequestOfZeroIsNotRendered(t *testing.T) {
	cp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods", Generation: 1}}
	cp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Pod"}
	cp.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"},
		Requests: []quotav1alpha1.ClaimTemplateRequest{
			{ResourceType: "core/requests.cpu", Amount: intstr.FromString("{{ trigger.metadata.annotations['cpu'] }}")},
			{ResourceType: "core/requests.memory", Amount: intstr.FromString("{{ trigger.metadata.annotations['memory'] }}")},
		},
	}
	compiled, err := policy.Compile(cp, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cpu, memory string
		want        []quotav1alpha1.ResourceRequest // nil: no claim
	}{
		{"250", "1024", []quotav1alpha1.ResourceRequest{{ResourceType: "core/requests.cpu", Amount: 250}, {ResourceType: "core/requests.memory", Amount: 1024}}},
		{"0", "1024", []quotav1alpha1.ResourceRequest{{ResourceType: "core/requests.memory", Amount: 1024}}},
		{"250", "0", []quotav1alpha1.ResourceRequest{{ResourceType: "core/requests.cpu", Amount: 250}}},
		{"0", "0", nil},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a", UID: "uid-p",
			Annotations: map[string]string{"cpu": tc.cpu, "memory": tc.memory}}}
		obj := map[string]any{"metadata": map[string]any{"name": "p", "namespace": "team-a", "annotations": map[string]any{"cpu": tc.cpu, "memory": tc.memory}}}
		ok, rendered, err := compiled.Evaluate(policy.Input{Object: obj})
		if err != nil {
			t.Fatalf("cpu %s, memory %s: %v", tc.cpu, tc.memory, err)
		}
		if ok != (tc.want != nil) {
			t.Fatalf("cpu %s, memory %s: a claim rendered %v, want %v", tc.cpu, tc.memory, ok, tc.want != nil)
		}
		if !ok {
			continue
		}
		res := RenderClaim(ClaimSource{Policy: cp.Name, Generation: 1, Kind: corev1.SchemeGroupVersion.WithKind("Pod"),
			Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: "team-a", Object: pod, SystemNamespace: "quota-system"}, rendered, v)
		if res.Problem != 0 {
			t.Fatalf("cpu %s, memory %s: problem %d: %v %v", tc.cpu, tc.memory, res.Problem, res.Err, res.Errs)
		}
		if diff := cmp.Diff(tc.want, res.Claim.Spec.Requests); diff != "" {
			t.Errorf("cpu %s, memory %s: requests (-want +got):\n%s", tc.cpu, tc.memory, diff)
		}
	}
}
