package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quotaplane/quotaplane/api/internal/prototest"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// protoKinds are the kinds of the package: every one must round-trip.
var protoKinds = []prototest.Object{
	&rmv1alpha1.Organization{}, &rmv1alpha1.OrganizationList{},
	&rmv1alpha1.Project{}, &rmv1alpha1.ProjectList{},
}

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := rmv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// TestProtoKindsAreRegistered keeps protoKinds in step with the scheme.
func TestProtoKindsAreRegistered(t *testing.T) {
	prototest.KindsAreRegistered(t, newScheme(t), rmv1alpha1.SchemeGroupVersion, protoKinds)
}

// TestProtobufRoundTrip: every kind, fuzzed, round-trips through the
// generated code; no field escapes.
func TestProtobufRoundTrip(t *testing.T) {
	prototest.RoundTrip(t, newScheme(t), protoKinds)
}

// TestProtobufSerializer: every kind round-trips through a codec factory's
// protobuf serializer.
func TestProtobufSerializer(t *testing.T) {
	prototest.Serializer(t, newScheme(t), rmv1alpha1.SchemeGroupVersion, protoKinds)
}

// sampleOrganization and sampleProject are hand-filled objects.
func sampleOrganization() *rmv1alpha1.Organization {
	at := metav1.NewTime(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	return &rmv1alpha1.Organization{
		TypeMeta:   metav1.TypeMeta{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Organization"},
		ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "5f0c1d1e-0000-4000-8000-000000000001", Generation: 1, CreationTimestamp: at},
		Spec:       rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard},
		Status: rmv1alpha1.OrganizationStatus{
			ObservedGeneration: 1,
			Namespace:          "organization-acme",
			Conditions:         []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: at, Reason: "Ready", Message: "namespace and owner binding exist"}},
		},
	}
}

func sampleProject() *rmv1alpha1.Project {
	return &rmv1alpha1.Project{
		TypeMeta:   metav1.TypeMeta{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Project"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"resourcemanager.miloapis.com/organization-name": "acme"}},
		Spec:       rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: "acme"}},
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
		{sampleOrganization(), wantOrganizationJSON},
		{sampleProject(), wantProjectJSON},
	} {
		prototest.JSONUnchanged(t, tc.obj, tc.want)
	}
}

// The JSON of the sample objects as the types produced it before they had
// protobuf tags.
const (
	wantOrganizationJSON = `{"kind":"Organization","apiVersion":"resourcemanager.miloapis.com/v1alpha1","metadata":{"name":"acme","uid":"5f0c1d1e-0000-4000-8000-000000000001","generation":1,"creationTimestamp":"2026-03-04T05:06:07Z"},"spec":{"type":"Standard"},"status":{"observedGeneration":1,"namespace":"organization-acme","conditions":[{"type":"Ready","status":"True","observedGeneration":1,"lastTransitionTime":"2026-03-04T05:06:07Z","reason":"Ready","message":"namespace and owner binding exist"}]}}`
	wantProjectJSON      = `{"kind":"Project","apiVersion":"resourcemanager.miloapis.com/v1alpha1","metadata":{"name":"web","labels":{"resourcemanager.miloapis.com/organization-name":"acme"}},"spec":{"ownerRef":{"kind":"Organization","name":"acme"}},"status":{}}`
)
