package v1alpha1_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/quotaplane/quotaplane/api/internal/prototest"
	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// protoKinds are the kinds of the package: every one must round-trip.
var protoKinds = []prototest.Object{
	&quotav1alpha1.ResourceRegistration{}, &quotav1alpha1.ResourceRegistrationList{},
	&quotav1alpha1.ResourceGrant{}, &quotav1alpha1.ResourceGrantList{},
	&quotav1alpha1.ResourceClaim{}, &quotav1alpha1.ResourceClaimList{},
	&quotav1alpha1.AllowanceBucket{}, &quotav1alpha1.AllowanceBucketList{},
	&quotav1alpha1.ClaimCreationPolicy{}, &quotav1alpha1.ClaimCreationPolicyList{},
	&quotav1alpha1.GrantCreationPolicy{}, &quotav1alpha1.GrantCreationPolicyList{},
	&quotav1alpha1.QuotaRequest{}, &quotav1alpha1.QuotaRequestList{},
	&quotav1alpha1.QuotaApprovalRule{}, &quotav1alpha1.QuotaApprovalRuleList{},
	&quotav1alpha1.QuotaReview{},
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestProtoKindsAreRegistered keeps protoKinds in step with the scheme.
func TestProtoKindsAreRegistered(t *testing.T) {
	prototest.KindsAreRegistered(t, newScheme(t), quotav1alpha1.SchemeGroupVersion, protoKinds)
}

// TestProtobufRoundTrip: every kind, fuzzed, round-trips through the
// generated code; no field escapes.
func TestProtobufRoundTrip(t *testing.T) {
	prototest.RoundTrip(t, newScheme(t), protoKinds)
}

// TestProtobufSerializer: every kind round-trips through a codec factory's
// protobuf serializer.
func TestProtobufSerializer(t *testing.T) {
	prototest.Serializer(t, newScheme(t), quotav1alpha1.SchemeGroupVersion, protoKinds)
}

// sampleClaimCreationPolicy is a hand-filled object: an embedded inline
// status, an int-or-string, maps, omitzero and optional pointers.
func sampleClaimCreationPolicy() *quotav1alpha1.ClaimCreationPolicy {
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	target := quotav1alpha1.ClaimTarget{ResourceClaimTemplate: quotav1alpha1.ResourceClaimTemplate{
		Metadata: quotav1alpha1.TemplateMetadata{
			Name: "claim-{{ trigger.metadata.name }}", GenerateName: "claim-", Namespace: "{{ trigger.metadata.namespace }}",
			Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
		},
		Spec: quotav1alpha1.ResourceClaimTemplateSpec{
			ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "{{ trigger.metadata.name }}", Namespace: "ns"},
			Requests: []quotav1alpha1.ClaimTemplateRequest{
				{ResourceType: "compute.example.com/cpus", Amount: intstr.FromString("{{ trigger.spec.cpu }}"), Dimensions: []quotav1alpha1.TemplateDimension{{Key: "example.com/location", Value: "dfw"}}},
				{ResourceType: "compute.example.com/instances", Amount: intstr.FromInt32(1)},
			},
		},
	}}
	trigger := quotav1alpha1.Trigger{
		Resource:    quotav1alpha1.TriggerResource{APIVersion: "compute.example.com/v1", Kind: "Instance"},
		Constraints: []quotav1alpha1.Constraint{{Expression: "true", Message: "always"}},
	}
	return &quotav1alpha1.ClaimCreationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ClaimCreationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "instances", Generation: 3, Labels: map[string]string{"team": "compute"}, CreationTimestamp: at},
		Spec:       quotav1alpha1.ClaimCreationPolicySpec{Trigger: trigger, Target: target, Disabled: true, FailurePolicy: quotav1alpha1.FailurePolicy("Fail")},
		Status: quotav1alpha1.ClaimCreationPolicyStatus{
			PolicyStatus: quotav1alpha1.PolicyStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: at, Reason: "Valid", Message: "ok"}}},
			Enforced:     &quotav1alpha1.EnforcedClaimPolicy{Generation: 2, Trigger: trigger, Target: target, FailurePolicy: quotav1alpha1.FailurePolicy("Ignore")},
			ExistingObjects: &quotav1alpha1.ExistingObjectsStatus{
				Generation: 2, Request: "r1", Objects: 10, Charged: 8, OverLimit: 1, NotCharged: 2, Message: "done", CompletionTime: &at,
			},
		},
	}
}

// sampleResourceRegistration is a hand-filled object with a quantity and a
// status left empty (omitempty of a struct).
func sampleResourceRegistration() *quotav1alpha1.ResourceRegistration {
	q := resource.MustParse("1Mi")
	return &quotav1alpha1.ResourceRegistration{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceRegistration"},
		ObjectMeta: metav1.ObjectMeta{Name: "memory"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType:         quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization"},
			ParentConsumerTypes:  []quotav1alpha1.ConsumerTypeRef{{Kind: "Tenant"}},
			Type:                 quotav1alpha1.RegistrationType("Allocation"),
			ResourceType:         "compute.example.com/memory",
			Description:          "memory",
			BaseUnit:             "MiB",
			DisplayUnit:          "GiB",
			UnitConversionFactor: 1024,
			BaseUnitQuantity:     &q,
			ClaimingResources:    []quotav1alpha1.ClaimingResource{{APIGroup: "compute.example.com", Kind: "Instance"}},
			Thresholds:           &quotav1alpha1.UtilizationThresholds{Warning: 70, Critical: 90},
		},
	}
}

// TestJSONUnchanged checks that the protobuf struct tags left the JSON form
// alone: the expected documents were produced by the types before the tags
// were added.
func TestJSONUnchanged(t *testing.T) {
	for _, tc := range []struct {
		obj  prototest.Object
		want string
	}{
		{sampleClaimCreationPolicy(), wantClaimCreationPolicyJSON},
		{sampleResourceRegistration(), wantResourceRegistrationJSON},
	} {
		prototest.JSONUnchanged(t, tc.obj, tc.want)
	}
}

// The JSON of the sample objects as the types produced it before they had
// protobuf tags.
const (
	wantClaimCreationPolicyJSON  = `{"kind":"ClaimCreationPolicy","apiVersion":"quota.miloapis.com/v1alpha1","metadata":{"name":"instances","generation":3,"creationTimestamp":"2026-03-04T05:06:07Z","labels":{"team":"compute"}},"spec":{"trigger":{"resource":{"apiVersion":"compute.example.com/v1","kind":"Instance"},"constraints":[{"expression":"true","message":"always"}]},"target":{"resourceClaimTemplate":{"metadata":{"name":"claim-{{ trigger.metadata.name }}","generateName":"claim-","namespace":"{{ trigger.metadata.namespace }}","labels":{"a":"b"},"annotations":{"c":"d"}},"spec":{"consumerRef":{"apiGroup":"resourcemanager.miloapis.com","kind":"Project","name":"{{ trigger.metadata.name }}","namespace":"ns"},"requests":[{"resourceType":"compute.example.com/cpus","amount":"{{ trigger.spec.cpu }}","dimensions":[{"key":"example.com/location","value":"dfw"}]},{"resourceType":"compute.example.com/instances","amount":1}]}}},"disabled":true,"failurePolicy":"Fail"},"status":{"observedGeneration":3,"conditions":[{"type":"Ready","status":"True","observedGeneration":3,"lastTransitionTime":"2026-03-04T05:06:07Z","reason":"Valid","message":"ok"}],"enforced":{"generation":2,"trigger":{"resource":{"apiVersion":"compute.example.com/v1","kind":"Instance"},"constraints":[{"expression":"true","message":"always"}]},"target":{"resourceClaimTemplate":{"metadata":{"name":"claim-{{ trigger.metadata.name }}","generateName":"claim-","namespace":"{{ trigger.metadata.namespace }}","labels":{"a":"b"},"annotations":{"c":"d"}},"spec":{"consumerRef":{"apiGroup":"resourcemanager.miloapis.com","kind":"Project","name":"{{ trigger.metadata.name }}","namespace":"ns"},"requests":[{"resourceType":"compute.example.com/cpus","amount":"{{ trigger.spec.cpu }}","dimensions":[{"key":"example.com/location","value":"dfw"}]},{"resourceType":"compute.example.com/instances","amount":1}]}}},"failurePolicy":"Ignore"},"existingObjects":{"generation":2,"request":"r1","objects":10,"charged":8,"overLimit":1,"notCharged":2,"message":"done","completionTime":"2026-03-04T05:06:07Z"}}}`
	wantResourceRegistrationJSON = `{"kind":"ResourceRegistration","apiVersion":"quota.miloapis.com/v1alpha1","metadata":{"name":"memory"},"spec":{"consumerType":{"apiGroup":"resourcemanager.miloapis.com","kind":"Organization"},"parentConsumerTypes":[{"kind":"Tenant"}],"type":"Allocation","resourceType":"compute.example.com/memory","description":"memory","baseUnit":"MiB","displayUnit":"GiB","unitConversionFactor":1024,"baseUnitQuantity":"1Mi","claimingResources":[{"apiGroup":"compute.example.com","kind":"Instance"}],"thresholds":{"warning":70,"critical":90}},"status":{}}`
)
