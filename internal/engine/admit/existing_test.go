package admit

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func existingClaim(name, object string, amount int64) *quotav1alpha1.ResourceClaim {
	c := rendered(name, "p", amount)
	c.Annotations[quotav1alpha1.AnnotationResourceUID] = object
	return c
}

// TestChargeExisting: existing objects are charged even beyond the limit
// (counted as over it), never twice, not while another change of the object
// is being charged, and not when the registrations refuse the claim.
func TestChargeExisting(t *testing.T) {
	term := newTerm(2)
	claims := []*quotav1alpha1.ResourceClaim{existingClaim("a", "o1", 1), existingClaim("b", "o2", 1), existingClaim("c", "o3", 1)}
	term.Cache.Lock()
	res, entries := term.chargeExistingLocked("p", claims, metav1.Now())
	term.Cache.Unlock()
	if len(res.Charged) != 3 || res.OverLimit != 1 || len(entries) != 3 || len(res.Busy) != 0 || len(res.Refused) != 0 {
		t.Fatalf("3 objects against a limit of 2: %+v, want 3 charged, 1 over the limit", res)
	}
	if got := allocated(term); got != 3 {
		t.Fatalf("allocated %d, want 3 (over the limit of 2)", got)
	}

	// Again, as a second pass or another replica's retry would: the
	// pending entries make every object busy, nothing is charged twice.
	term.Cache.Lock()
	res, _ = term.chargeExistingLocked("p", claims, metav1.Now())
	term.Cache.Unlock()
	if len(res.Charged) != 0 || len(res.Busy) != 3 {
		t.Fatalf("charging the same objects again: %+v, want all 3 busy and none charged", res)
	}
	if got := allocated(term); got != 3 {
		t.Fatalf("allocated %d after the second pass, want 3", got)
	}

	// An unregistered resource type is refused, not charged.
	bad := existingClaim("d", "o4", 1)
	bad.Spec.Requests[0].ResourceType = "x.io/unregistered"
	// A claim name another object's claim holds is refused.
	taken := existingClaim("a", "o5", 1)
	term.Cache.Lock()
	res, _ = term.chargeExistingLocked("p", []*quotav1alpha1.ResourceClaim{bad, taken}, metav1.Now())
	term.Cache.Unlock()
	if len(res.Charged) != 0 || res.Refused["o4"] == "" || res.Refused["o5"] == "" {
		t.Fatalf("an unregistered type and a taken name: %+v, want both refused with a reason", res)
	}
	if got := allocated(term); got != 3 {
		t.Fatalf("allocated %d after refusals, want 3", got)
	}
}
