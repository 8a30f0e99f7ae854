package inforcetest

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic/fake"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// ReadyPolicy is a ClaimCreationPolicy named name, judged valid at its
// generation 1, charging 1 of resourceType to Organization acme for each
// object of kind (core group, v1) its constraints accept.
func ReadyPolicy(name, kind, resourceType string, constraints ...string) *quotav1alpha1.ClaimCreationPolicy {
	cp := &quotav1alpha1.ClaimCreationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ClaimCreationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
	}
	cp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: kind}
	for _, c := range constraints {
		cp.Spec.Trigger.Constraints = append(cp.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: c})
	}
	cp.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: resourceType, Amount: intstr.FromInt32(1)}},
	}
	cp.Status.ObservedGeneration = 1
	cp.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.PolicyConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1,
		Reason: "Valid", LastTransitionTime: metav1.Now()}}
	return cp
}

// Dynamic is a dynamic client that lists policies (and no
// ResourceRegistration), as an inforce.Index reads them.
func Dynamic(t testing.TB, policies ...*quotav1alpha1.ClaimCreationPolicy) *fake.FakeDynamicClient {
	t.Helper()
	var objs []runtime.Object
	for _, cp := range policies {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cp)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: u})
	}
	return fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		quotav1alpha1.SchemeGroupVersion.WithResource("claimcreationpolicies"): "ClaimCreationPolicyList",
		quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations"): "ResourceRegistrationList",
	}, objs...)
}
