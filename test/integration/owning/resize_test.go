package owning

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// A resize is all or nothing: growth that fits is granted as a growth
// claim; growth that does not fit is denied and the owner keeps its size,
// nothing of the growth held, until room appears; a shrink is a replacement
// claim made before the old ones are broken, and once it is granted a
// restarted service's next call releases the old ones; Release gives back
// everything.
func TestResizeIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 10)
	owner := s.resource("vm-resize")
	resize := func(c *quotaclaim.Claimer, n int64, want quotaclaim.Phase) quotaclaim.Status {
		t.Helper()
		var st quotaclaim.Status
		for range 600 { // a service's reconciles, until the change is decided
			var err error
			st, err = c.Resize(ctx, owner, s.f.Org, s.cpu(n))
			if err != nil {
				t.Fatalf("Resize to %d: %v", n, err)
			}
			if st.Phase == want {
				return st
			}
			waitBrief()
		}
		t.Fatalf("Resize to %d is %s (%s), want %s", n, st.Phase, st.Message, want)
		return st
	}
	resize(s.claimer, 4, quotaclaim.Granted) // the first claim, as Ensure
	s.f.WaitBucket(quotatest.N(10, 4, 6), "cpu")
	resize(s.claimer, 7, quotaclaim.Granted) // growth of 3
	s.f.WaitBucket(quotatest.N(10, 7, 3), "cpu")
	resize(s.claimer, 12, quotaclaim.Denied) // growth of 5, 3 available: nothing of it held
	s.f.WaitBucket(quotatest.N(10, 7, 3), "cpu")
	if n := s.claimsOf(owner); n != 3 {
		t.Fatalf("%d claims, want 3 (4, +3, and the waiting +5)", n)
	}

	g := &quotav1alpha1.ResourceGrant{}
	if err := s.f.C.Get(ctx, client.ObjectKey{Namespace: s.f.NS, Name: "g"}, g); err != nil {
		t.Fatal(err)
	}
	s.f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 12 })
	resize(s.claimer, 12, quotaclaim.Granted) // the waiting growth, granted when room appeared
	s.f.WaitBucket(quotatest.N(12, 12, 0), "cpu")

	// A shrink needs room for the new size beside the old one.
	resize(s.claimer, 5, quotaclaim.Denied)
	s.f.WaitBucket(quotatest.N(12, 12, 0), "cpu")
	s.f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 17 })
	s.decidedReplacement(owner)
	// The service restarts between the replacement's grant and the break:
	// a new Claimer's call releases the old claims.
	restarted := *s.claimer
	resize(&restarted, 5, quotaclaim.Granted)
	s.f.WaitBucket(quotatest.N(17, 5, 12), "cpu")
	if n := s.claimsOf(owner); n != 1 {
		t.Fatalf("%d claims after the shrink, want the replacement alone", n)
	}
	if err := restarted.Release(ctx, owner); err != nil {
		t.Fatal(err)
	}
	s.f.WaitBucket(quotatest.N(17, 0, 17), "cpu")
}

// decidedReplacement waits until the owner's replacement claim is Granted.
func (s *service) decidedReplacement(owner quotaclaim.Owner) {
	s.t.Helper()
	for range 600 {
		list, err := s.quota.QuotaV1alpha1().ResourceClaims(s.f.NS).List(context.Background(), metav1.ListOptions{LabelSelector: quotaclaim.LabelOwnerUID + "=" + string(owner.UID)})
		if err != nil {
			s.t.Fatal(err)
		}
		for i := range list.Items {
			if list.Items[i].Annotations[quotaclaim.AnnotationReplaces] == "true" && quotaclaim.StatusOf(&list.Items[i]).Phase == quotaclaim.Granted {
				return
			}
		}
		waitBrief()
	}
	s.t.Fatal("the replacement claim was not granted")
}
