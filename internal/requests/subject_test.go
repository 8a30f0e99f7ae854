package requests

import (
	"testing"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// A decision is carried out only for what was asked: the subject it
// records must name the spec's bucket (the consumer, the type and the
// dimensions, in any order).
func TestDecidedForWhatWasAsked(t *testing.T) {
	org := quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
	dims := []quotav1alpha1.Dimension{{Key: "region", Value: "east"}, {Key: "tier", Value: "gold"}}
	qr := &quotav1alpha1.QuotaRequest{Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: org, ResourceType: "example.com/vcpus", Dimensions: dims}}
	decided := func(c quotav1alpha1.ConsumerRef, rt quotav1alpha1.ResourceType, d ...quotav1alpha1.Dimension) *quotav1alpha1.QuotaRequest {
		q := qr.DeepCopy()
		q.Status.Decision = &quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove, ConsumerRef: &c, ResourceType: rt, Dimensions: d}
		return q
	}
	other := org
	other.Name = "beta"
	for _, tc := range []struct {
		name string
		qr   *quotav1alpha1.QuotaRequest
		same bool
	}{
		{"no subject recorded: what was asked", qr, true},
		{"the spec's subject, dimensions reordered", decided(org, "example.com/vcpus", dims[1], dims[0]), true},
		{"another consumer", decided(other, "example.com/vcpus", dims...), false},
		{"another type", decided(org, "example.com/machines", dims...), false},
		{"fewer dimensions", decided(org, "example.com/vcpus", dims[0]), false},
	} {
		if got := decidedFor(tc.qr).same(askedFor(tc.qr)); got != tc.same {
			t.Errorf("%s: same = %v, want %v", tc.name, got, tc.same)
		}
	}
}
