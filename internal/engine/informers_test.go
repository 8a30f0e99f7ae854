package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// TestTheFirstListIsAddedBeforeAnyLaterEvent: the claims of the claim
// informer's first list are gathered and added at once; an event after the
// list (an add, an update, a delete) first adds what was gathered, so the
// cache sees events in the order they happened; a later flush adds nothing
// twice.
func TestTheFirstListIsAddedBeforeAnyLaterEvent(t *testing.T) {
	claim := func(name string) *quotav1alpha1.ResourceClaim {
		return &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	for _, later := range []string{"add", "update", "delete", "none"} {
		t.Run(later, func(t *testing.T) {
			var seen []string
			first := &firstList[*quotav1alpha1.ResourceClaim]{add: func(cls []*quotav1alpha1.ResourceClaim) {
				for _, c := range cls {
					seen = append(seen, "listed "+c.Name)
				}
			}}
			h := firstHandler(first,
				func(c *quotav1alpha1.ResourceClaim) { seen = append(seen, "added "+c.Name) },
				func(c *quotav1alpha1.ResourceClaim) { seen = append(seen, "updated "+c.Name) },
				func(c *quotav1alpha1.ResourceClaim) { seen = append(seen, "deleted "+c.Name) })
			h.OnAdd(claim("a"), true)
			h.OnAdd(claim("b"), true)
			if len(seen) != 0 {
				t.Fatalf("claims of the first list added one by one: %v", seen)
			}
			want := []string{"listed a", "listed b"}
			switch later {
			case "add":
				h.OnAdd(claim("c"), false)
				want = append(want, "added c")
			case "update":
				h.OnUpdate(claim("a"), claim("a"))
				want = append(want, "updated a")
			case "delete":
				h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: claim("b")})
				want = append(want, "deleted b")
			}
			first.flush() // the term's, once every informer has synced
			first.flush()
			h.OnAdd(claim("d"), true) // a relist's: one at a time now
			want = append(want, "added d")
			if diff := cmp.Diff(want, seen); diff != "" {
				t.Errorf("what the cache saw (-want +got):\n%s", diff)
			}
		})
	}
}
