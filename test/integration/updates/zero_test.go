package updates

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// goldAmount charges 2 gold for a Gadget whose note is "gold", else 0.
const goldAmount = "{{ has(trigger.spec.note) && trigger.spec.note == 'gold' ? 2 : 0 }}"

// newTwoRequestWorld is newWorld with a policy of two requests: cpus as
// newWorld charges them, and gold (goldAmount).
func newTwoRequestWorld(t *testing.T) *world {
	t.Helper()
	installGadgets(t)
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"cpus", "gold"}, quotav1alpha1.ClaimingResource{APIGroup: "updates.example.com", Kind: "Gadget"})
	f.Limit = 10
	f.Grant("g", map[string][]quotatest.Bucket{"cpus": {{Amount: 10}}, "gold": {{Amount: 5}}})
	w := &world{Fixture: f, dc: dynamic.NewForConfigOrDie(srv.Config).Resource(gadgetsGVR).Namespace(f.NS)}
	w.policy = f.Policy("cpus-gold", "updates.example.com/v1", "Gadget", "cpus", intstr.FromString(cpusAmount), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.Requests = append(p.Spec.Target.ResourceClaimTemplate.Spec.Requests,
			quotav1alpha1.ClaimTemplateRequest{ResourceType: string(f.RT("gold")), Amount: intstr.FromString(goldAmount)})
	})
	f.WaitPolicyReady(w.policy, metav1.ConditionTrue, w.probe())
	return w
}

func noted(name string, cpus int64, note string) *unstructured.Unstructured {
	g := gadget(name, cpus)
	if note != "" {
		g.Object["spec"].(map[string]any)["note"] = note
	}
	return g
}

// requestsOf is what a gadget's claims ask for, by the fixture's resource
// type name, and how many claims it has.
func (w *world) requestsOf(name string) (map[string]int64, int) {
	claims := w.claimsOf(name)
	got := map[string]int64{}
	for _, c := range claims {
		for _, r := range c.Spec.Requests {
			for _, rt := range []string{"cpus", "gold"} {
				if r.ResourceType == w.RT(rt) {
					got[rt] += r.Amount
				}
			}
		}
	}
	return got, len(claims)
}

// waitRequests waits until a gadget holds exactly want, in one claim (in
// none when want is empty).
func (w *world) waitRequests(name string, want map[string]int64) {
	w.T.Helper()
	var got map[string]int64
	var n int
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got, n = w.requestsOf(name)
		if len(want) == 0 {
			return n == 0, nil
		}
		if n != 1 || len(got) != len(want) {
			return false, nil
		}
		for rt, a := range want {
			if got[rt] != a {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		w.T.Fatalf("gadget %s holds %v in %d claims; want %v in %d", name, got, n, want, min(len(want), 1))
	}
}

// TestAnAmountOfZeroChargesNothing: a request a policy renders as 0 is left
// out of the claim, and an object all of whose requests render 0 is
// admitted with no claim — on create, on update (which gives back what the
// object held), in a QuotaReview and when existing objects are charged —
// while a ResourceClaim created through the API with amount 0 is refused as
// before. verify finds nothing missing.
func TestAnAmountOfZeroChargesNothing(t *testing.T) {
	w := newTwoRequestWorld(t)
	ctx := context.Background()

	// Create: nothing to charge, admitted, no claim.
	if _, err := w.dc.Create(ctx, noted("none", 0, ""), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a gadget of 0 cpus, no gold: %v", err)
	}
	// One request of two renders 0: a claim of the other alone.
	if _, err := w.dc.Create(ctx, noted("both", 3, "gold"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.dc.Create(ctx, noted("cpus-only", 1, ""), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a gadget of 1 cpu, no gold: %v", err)
	}
	w.waitRequests("both", map[string]int64{"cpus": 3, "gold": 2})
	w.waitRequests("cpus-only", map[string]int64{"cpus": 1})
	w.WaitBucket(quotatest.N(10, 4, 6), "cpus")
	w.WaitBucket(quotatest.N(5, 2, 3), "gold")
	if _, n := w.requestsOf("none"); n != 0 {
		t.Fatalf("a gadget charging nothing holds %d claims", n)
	}

	// Update: a request dropped to 0 gives back what it held; every request
	// dropped to 0 gives back the claim; from 0 up is charged again.
	if err := w.patch("both", map[string]any{"note": "plain"}); err != nil {
		t.Fatalf("dropping gold to 0: %v", err)
	}
	w.waitRequests("both", map[string]int64{"cpus": 3})
	w.WaitBucket(quotatest.N(5, 0, 5), "gold")
	w.WaitBucket(quotatest.N(10, 4, 6), "cpus")
	if err := w.patch("both", map[string]any{"cpus": 0}); err != nil {
		t.Fatalf("dropping cpus to 0: %v", err)
	}
	w.waitRequests("both", nil)
	w.WaitBucket(quotatest.N(10, 1, 9), "cpus")
	if err := w.patch("none", map[string]any{"cpus": 2, "note": "gold"}); err != nil {
		t.Fatalf("growing a gadget that held nothing: %v", err)
	}
	w.waitRequests("none", map[string]int64{"cpus": 2, "gold": 2})
	w.WaitBucket(quotatest.N(10, 3, 7), "cpus")
	w.WaitBucket(quotatest.N(5, 2, 3), "gold")

	// A QuotaReview answers as admission: NotCharged, and the nonzero
	// request alone.
	review := &quotav1alpha1.QuotaReview{Spec: quotav1alpha1.QuotaReviewSpec{Namespace: w.NS}}
	for _, g := range []*unstructured.Unstructured{noted("review-zero", 0, ""), noted("review-cpus", 2, "")} {
		raw, err := json.Marshal(g.Object)
		if err != nil {
			t.Fatal(err)
		}
		review.Spec.Objects = append(review.Spec.Objects, runtime.RawExtension{Raw: raw})
	}
	var got *quotav1alpha1.QuotaReview
	qc := versioned.NewForConfigOrDie(srv.Config)
	// The review's mapping of kinds learns the Gadget CRD a moment after
	// it is served.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = qc.QuotaV1alpha1().QuotaReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && (len(got.Status.Objects) == 0 || got.Status.Objects[0].Reason != quotav1alpha1.ReviewReasonNotServed), err
	}); err != nil {
		t.Fatalf("reviewing gadgets: %v; last answer %+v", err, got)
	}
	if st := got.Status; !st.Fits || len(st.Objects) != 2 || st.Objects[0].Result != quotav1alpha1.ReviewNotCharged || len(st.Objects[0].Charges) != 0 ||
		st.Objects[1].Result != quotav1alpha1.ReviewFits || len(st.Objects[1].Charges) != 1 || st.Objects[1].Charges[0].ResourceType != string(w.RT("cpus")) {
		t.Fatalf("the review of a gadget charging nothing and one of 2 cpus, no gold: %+v", st)
	}

	// Existing objects: a gadget stored while the policy was disabled, all
	// of whose requests render 0, is neither charged nor reported uncharged.
	setDisabled := func(disabled bool) {
		t.Helper()
		p := &quotav1alpha1.ClaimCreationPolicy{}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := w.C.Get(ctx, client.ObjectKeyFromObject(w.policy), p); err != nil {
				return err
			}
			p.Spec.Disabled = disabled
			return w.C.Update(ctx, p)
		}); err != nil {
			t.Fatal(err)
		}
		w.policy = p
	}
	w.waitExisting(func(st *quotav1alpha1.ExistingObjectsStatus, p *quotav1alpha1.ClaimCreationPolicy) bool {
		return st.Generation == p.Generation
	})
	setDisabled(true)
	w.WaitPolicyNotInForce(gadgetsGVR, w.probe(), w.policy.Name)
	if _, err := w.dc.Create(ctx, noted("existing-zero", 0, ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.dc.Create(ctx, noted("existing-gold", 1, "gold"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setDisabled(false)
	st := w.waitExisting(func(st *quotav1alpha1.ExistingObjectsStatus, p *quotav1alpha1.ClaimCreationPolicy) bool {
		return st.Generation == p.Generation && st.Charged == 1
	})
	if st.NotCharged != 0 {
		t.Fatalf("existing objects: %+v; want none reported not charged", st)
	}
	w.waitRequests("existing-gold", map[string]int64{"cpus": 1, "gold": 2})
	w.waitRequests("existing-zero", nil)
	w.WaitBucket(quotatest.N(10, 4, 6), "cpus")
	w.WaitBucket(quotatest.N(5, 4, 1), "gold")

	// A claim created through the API with amount 0 is still refused.
	err := w.C.Create(ctx, w.ClaimObject("direct-zero", quotatest.R("cpus", 0)))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a ResourceClaim of amount 0 created through the API: %v; want 422 Invalid", err)
	}
	quotatest.VerifyClean(t, srv)
}
