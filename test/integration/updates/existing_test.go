package updates

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// The pass for the first generation reports first: it lists Gadgets
	// once its grace ends, so had it not ended before the two are created,
	// it could charge them itself, before the policy is enabled again.
	w.waitExisting(func(st *quotav1alpha1.ExistingObjectsStatus, p *quotav1alpha1.ClaimCreationPolicy) bool {
		return st.Generation == p.Generation
	})
	setDisabled(true)
	w.WaitPolicyNotInForce(gadgetsGVR, w.probe(), w.policy.Name)
	w.create("a", 2)
	w.create("b", 3)
	setDisabled(false)
	w.waitExisting(func(st *quotav1alpha1.ExistingObjectsStatus, p *quotav1alpha1.ClaimCreationPolicy) bool {
		return st.Generation == p.Generation && st.Charged == 2
	})
	w.waitHeld("a", "cpus", 2)
	w.waitHeld("b", "cpus", 3)
	w.WaitBucket(quotatest.N(10, 5, 5), "cpus")
	if err := w.patch("a", map[string]any{"cpus": 4}); err != nil {
		t.Fatalf("growing a charged existing Gadget within the limit: %v", err)
	}
	w.waitHeld("a", "cpus", 4)
	w.WaitBucket(quotatest.N(10, 7, 3), "cpus")

	// A new pass asked for (what verify --repair does) finds both charged:
	// it charges nothing again, and says why.
	p := &quotav1alpha1.ClaimCreationPolicy{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(w.policy), p); err != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, quotav1alpha1.AnnotationChargeExisting, "again")
		return w.C.Update(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	st := w.waitExisting(func(st *quotav1alpha1.ExistingObjectsStatus, _ *quotav1alpha1.ClaimCreationPolicy) bool {
		return st.Request == "again"
	})
	if st.Charged != 0 || st.Objects < 2 || !strings.Contains(st.Message, "2 already held a claim of this policy") {
		t.Fatalf("a second pass over two charged Gadgets reported %+v; want both Gadgets examined (objects counts every Gadget, in any namespace), 0 charged, a message saying both held a claim", st)
	}
	w.WaitBucket(quotatest.N(10, 7, 3), "cpus")
	quotatest.VerifyClean(t, srv)
}

// waitExisting waits until the policy's status.existingObjects satisfies
// done, and returns it; it fails the test with the status it saw.
func (w *world) waitExisting(done func(*quotav1alpha1.ExistingObjectsStatus, *quotav1alpha1.ClaimCreationPolicy) bool) *quotav1alpha1.ExistingObjectsStatus {
	w.T.Helper()
	p := &quotav1alpha1.ClaimCreationPolicy{}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := w.C.Get(ctx, client.ObjectKeyFromObject(w.policy), p); err != nil {
			return false, nil
		}
		st := p.Status.ExistingObjects
		return st != nil && done(st, p), nil
	})
	if err != nil {
		w.T.Fatalf("ClaimCreationPolicy %s at generation %d: status.existingObjects is %+v after 30s; conditions %+v, enforced generation %v",
			p.Name, p.Generation, p.Status.ExistingObjects, p.Status.Conditions, enforcedGeneration(p))
	}
	return p.Status.ExistingObjects
}

func enforcedGeneration(p *quotav1alpha1.ClaimCreationPolicy) any {
	if p.Status.Enforced == nil {
		return "none"
	}
	return p.Status.Enforced.Generation
}
