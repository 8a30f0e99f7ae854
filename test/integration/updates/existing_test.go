package updates

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestExistingGadgetsAreChargedTheirSize: Gadgets (a CRD kind, possibly
// not in discovery yet) created while their policy is disabled are charged
// what the policy computes for each — cpus × replicas — when it is enabled,
// and each then resizes from that charge.
func TestExistingGadgetsAreChargedTheirSize(t *testing.T) {
	w := newWorld(t, 10)
	ctx := context.Background()
	setDisabled := func(disabled bool) {
		t.Helper()
		p := &quotav1alpha1.ClaimCreationPolicy{}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.C.Get(ctx, client.ObjectKeyFromObject(w.policy), p); err != nil {
				return err
			}
			p.Spec.Disabled = disabled
			return w.C.Update(ctx, p)
		})
		if err != nil {
			t.Fatal(err)
		}
		w.policy = p
	}
	setDisabled(true)
	w.WaitPolicyNotInForce(gadgetsGVR, w.probe(), w.policy.Name)
	w.create("a", 2)
	w.create("b", 3)
	setDisabled(false)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := &quotav1alpha1.ClaimCreationPolicy{}
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(w.policy), p); err != nil {
			return false, nil
		}
		st := p.Status.ExistingObjects
		return st != nil && st.Generation == p.Generation && st.Charged == 2, nil
	})
	if err != nil {
		t.Fatal("the two existing Gadgets were not charged")
	}
	w.waitHeld("a", "cpus", 2)
	w.waitHeld("b", "cpus", 3)
	w.WaitBucket(quotatest.N(10, 5, 5), "cpus")
	if err := w.patch("a", map[string]any{"cpus": 4}); err != nil {
		t.Fatalf("growing a charged existing Gadget within the limit: %v", err)
	}
	w.waitHeld("a", "cpus", 4)
	w.WaitBucket(quotatest.N(10, 7, 3), "cpus")
	quotatest.VerifyClean(t, srv)
}
