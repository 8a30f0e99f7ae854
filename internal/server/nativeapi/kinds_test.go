package nativeapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/config/crd"
)

// TestEveryCRDIsServedNatively: each CRD serve used to install becomes a
// native kind with its names, scope, status and selectable fields.
func TestEveryCRDIsServedNatively(t *testing.T) {
	crds, err := crd.ForServe()
	if err != nil {
		t.Fatal(err)
	}
	ks, err := Kinds()
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != len(crds) {
		t.Fatalf("%d CRDs, %d native kinds", len(crds), len(ks))
	}
	for i, k := range ks {
		c := crds[i]
		if k.GVK.Kind != c.Spec.Names.Kind || k.Resource != c.Spec.Names.Plural || len(k.fields) != len(c.Spec.Versions[0].SelectableFields) {
			t.Errorf("%s: native kind %+v", c.Name, k.GVK)
		}
		if k.New().GetObjectKind() == nil || k.NewList() == nil {
			t.Errorf("%s: no objects", c.Name)
		}
	}
}

func TestSelectableFieldsReadTypedObjects(t *testing.T) {
	ks, _ := Kinds()
	var claims *Kind
	for _, k := range ks {
		if k.GVK.Kind == "ResourceClaim" {
			claims = k
		}
	}
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "n"},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{Kind: "Organization", Name: "acme"}}}
	_, fields, err := newStrategy(claims).GetAttrs(c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"metadata.name": "c", "metadata.namespace": "n", "spec.consumerRef.kind": "Organization",
		"spec.consumerRef.name": "acme", "spec.resourceRef.name": ""}
	for k, v := range want {
		if got, ok := fields[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
}

// TestFieldSelectorsSayWhatIsSupported: a field selector on a field the
// CRD does not declare selectable is refused, naming those that are.
func TestFieldSelectorsSayWhatIsSupported(t *testing.T) {
	if _, err := Kinds(); err != nil {
		t.Fatal(err)
	}
	claims := quotav1alpha1.SchemeGroupVersion.WithKind("ResourceClaim")
	if _, _, err := Scheme().ConvertFieldLabel(claims, "spec.consumerRef.name", "acme"); err != nil {
		t.Fatalf("a selectable field: %v", err)
	}
	_, _, err := Scheme().ConvertFieldLabel(claims, "spec.requests", "x")
	want := "field label not supported: spec.requests (ResourceClaim objects can be selected by metadata.name, metadata.namespace, spec.consumerRef.kind"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a field not selectable: %v; want it to say %q", err, want)
	}
}

// TestUnsetReadsAsAbsent: what a typed object cannot tell from unset is
// absent in the form validated, as in a CRD's object.
func TestUnsetReadsAsAbsent(t *testing.T) {
	ks, _ := Kinds()
	for _, k := range ks {
		if k.GVK.Kind != "ResourceGrant" {
			continue
		}
		u, err := k.unstructured(&quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "g"}})
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := u.Object["spec"].(map[string]any)
		if _, ok := spec["allowances"]; ok {
			t.Errorf("nil allowances kept as %v; want absent", spec["allowances"])
		}
	}
}

func TestDefaults(t *testing.T) {
	c := &quotav1alpha1.ResourceClaim{}
	Scheme().Default(c)
	if d := c.Status.Conditions; len(d) != 1 || d[0].Reason != quotav1alpha1.ClaimReasonPendingEvaluation {
		t.Errorf("a new claim's conditions: %+v", d)
	}
	decided := &quotav1alpha1.ResourceClaim{Status: quotav1alpha1.ResourceClaimStatus{Conditions: []metav1.Condition{{Type: "Granted", Status: "True"}}}}
	Scheme().Default(decided)
	if len(decided.Status.Conditions) != 1 || decided.Status.Conditions[0].Status != "True" {
		t.Errorf("a decided claim's conditions changed: %+v", decided.Status.Conditions)
	}
	p := &quotav1alpha1.ClaimCreationPolicy{}
	Scheme().Default(p)
	if p.Spec.FailurePolicy != quotav1alpha1.FailurePolicyFail {
		t.Errorf("failurePolicy defaults to %q", p.Spec.FailurePolicy)
	}
}
