package claimpolicy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func testClaim() *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "secret-s-0123456789", Labels: map[string]string{"a": "b"},
			Annotations: map[string]string{"quota.miloapis.com/policy": "p", "quota.miloapis.com/resource-uid": "u"}},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/secrets", Amount: 1}},
			ResourceRef: &quotav1alpha1.ResourceRef{Kind: "Secret", Name: "s", Namespace: "ns"},
		},
	}
}

// TestClaimValidator: what the API server refuses in a ResourceClaim create
// — its metadata and its CRD schema — the validator refuses, naming the field.
func TestClaimValidator(t *testing.T) {
	v, err := newClaimValidator()
	if err != nil {
		t.Fatal(err)
	}
	if errs := v.validate(testClaim()); len(errs) != 0 {
		t.Fatalf("a valid claim: %v", errs)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*quotav1alpha1.ResourceClaim)
		field string
	}{
		{"name", func(c *quotav1alpha1.ResourceClaim) { c.Name = "Not_Valid" }, "metadata.name"},
		{"label", func(c *quotav1alpha1.ResourceClaim) { c.Labels["bad key!"] = "x" }, "metadata.labels"},
		{"amount", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests[0].Amount = 0 }, "spec.requests[0].amount"},
		{"no requests", func(c *quotav1alpha1.ResourceClaim) { c.Spec.Requests = nil }, "spec.requests"},
	} {
		c := testClaim()
		tc.edit(c)
		errs := v.validate(c)
		if len(errs) == 0 {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if got := errs.ToAggregate().Error(); !contains(got, tc.field) {
			t.Errorf("%s: %q does not name %s", tc.name, got, tc.field)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// BenchmarkClaimValidator is what checking one rendered claim costs a create.
func BenchmarkClaimValidator(b *testing.B) {
	v, err := newClaimValidator()
	if err != nil {
		b.Fatal(err)
	}
	c := testClaim()
	b.ReportAllocs()
	for b.Loop() {
		if errs := v.validate(c); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}
