package inforce

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// TestFirstCreateSeesEveryPolicy: a replica's first create (the plugin starts
// its policy watch on first use) is judged against every stored policy.
// Before, it waited only for the watch's store: a policy listed but not yet
// through the index handler was not applied, and the create was admitted
// uncharged — the failover over-grant TestDeletedLedgerCannotRevivePausedLeader
// found. Many policies make the handler lag its store by far more than the
// wait's poll period, so the old wait fails this every time.
func TestFirstCreateSeesEveryPolicy(t *testing.T) {
	const n = 300
	var objs []runtime.Object
	for i := range n {
		cp := &quotav1alpha1.ClaimCreationPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ClaimCreationPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%03d", i), Generation: 1},
		}
		cp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
		cp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == 'ns-%d'", i)}}
		cp.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
			ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "example.com/secrets", Amount: intstr.FromInt32(1)}},
		}
		cp.Status.ObservedGeneration = 1
		cp.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.PolicyConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1,
			Reason: "Valid", LastTransitionTime: metav1.Now()}}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: u})
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		policiesGVR:      "ClaimCreationPolicyList",
		registrationsGVR: "ResourceRegistrationList",
	}, objs...)
	x := New(10 * time.Second)
	x.Dynamic = dyn
	drained := make(chan struct{})
	t.Cleanup(func() { close(drained) })
	x.Drained = drained

	got, err := x.InForce("", "Secret")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("the first create was judged against %d of the %d stored policies for Secrets: the others would let it in uncharged", len(got), n)
	}
}
