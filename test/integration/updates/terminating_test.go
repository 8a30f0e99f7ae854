package updates

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestATerminatingObjectIsCharged: an object a finalizer holds after its
// delete is still read by whatever waits on it; an update that grows it is
// charged like any other (beyond the limit, refused), so 1 cannot become
// 1,000 against a limit of 10. Removing the finalizer charges nothing and the
// object's claims go with it.
func TestATerminatingObjectIsCharged(t *testing.T) {
	w := newWorld(t, 10)
	w.create("held", 1)
	w.waitHeld("held", "cpus", 1)
	ctx := context.Background()
	hold := []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`)
	if _, err := w.dc.Patch(ctx, "held", types.MergePatchType, hold, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.dc.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if w.get("held").GetDeletionTimestamp() == nil {
		t.Fatal("the gadget is not terminating")
	}

	err := w.patch("held", map[string]any{"cpus": 1000})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "from 1 to 1000") {
		t.Fatalf("growing a terminating gadget 1 → 1000 against a limit of 10: want 403 naming both amounts, got %v", err)
	}
	if got := spec(w.get("held"), "cpus"); got != 1 {
		t.Fatalf("the refused update changed the gadget: cpus %d", got)
	}
	// Within the limit it is charged.
	if err := w.patch("held", map[string]any{"cpus": 4}); err != nil {
		t.Fatalf("growing a terminating gadget within the limit: %v", err)
	}
	w.waitHeld("held", "cpus", 4)
	w.WaitBucket(quotatest.N(10, 4, 6), "cpus")
	quotatest.VerifyClean(t, srv)

	// Let it go: its quota goes with it.
	if _, err := w.dc.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.WaitBucket(quotatest.N(10, 0, 10), "cpus")
}
