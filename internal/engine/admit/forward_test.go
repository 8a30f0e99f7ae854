package admit

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// TestTheSameAttemptIsChargedOnce: a create forwarded again — after a
// timeout, or to a new leader that read its grant from the journal — is
// answered with its first grant: charged once, never refused as a name
// collision. Only a durable grant of the same object, policy and spec is
// given again.
func TestTheSameAttemptIsChargedOnce(t *testing.T) {
	other := func(c *quotav1alpha1.ResourceClaim) *quotav1alpha1.ResourceClaim {
		c.Annotations[quotav1alpha1.AnnotationResourceUID] = "obj-2"
		return c
	}
	cases := map[string]struct {
		durable   bool
		again     *quotav1alpha1.ResourceClaim
		wantAgain bool
	}{
		"the same attempt, durable":         {durable: true, again: rendered("a", "p", 4), wantAgain: true},
		"the same attempt, not yet durable": {again: rendered("a", "p", 4)},
		"another object, same claim name":   {durable: true, again: other(rendered("a", "p", 4))},
		"another amount":                    {durable: true, again: rendered("a", "p", 5)},
		"another policy":                    {durable: true, again: rendered("a", "q", 4)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			term := newTerm(10)
			term.Cache.Lock()
			entries, first, err := term.decideCreateLocked([]*quotav1alpha1.ResourceClaim{rendered("a", "p", 4)}, metav1.Now())
			if err != nil || !first.Granted {
				term.Cache.Unlock()
				t.Fatalf("first decision: %+v, %v", first, err)
			}
			for _, p := range entries {
				p.Durable = tc.durable
			}
			res, again := term.grantedBeforeLocked([]*quotav1alpha1.ResourceClaim{tc.again})
			term.Cache.Unlock()
			if again != tc.wantAgain {
				t.Fatalf("answered with the first grant: %v, want %v", again, tc.wantAgain)
			}
			if again && (!res.Granted || len(res.Decisions) != 1 || res.Claims[0].Requests[0].Amount != 4) {
				t.Errorf("the answer %+v is not the first grant", res)
			}
			if got := allocated(term); got != 4 {
				t.Errorf("allocated %d after asking twice, want 4 (charged once)", got)
			}
		})
	}
}
