package review

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
)

// TestCheckGivesTheReviewsAnswer: the claim library's Check and a
// QuotaReview of the same claim (Claimer.Claim) agree, claim by claim —
// granted or not, and refused with the same decision naming the same
// level's limit — for claims that fit, that a project's limit refuses, that
// only the organization's cap refuses, and one the registration refuses
// (it charges projects, not the organization).
// Neither takes anything.
func TestCheckGivesTheReviewsAnswer(t *testing.T) {
	w := newWorld(t, "web", "api")
	web, api := w.projects[0], w.projects[1]
	w.grant("org", w.consumer("Organization", w.org), 10)
	w.grant("web", w.consumer("Project", web), 6)
	w.grant("api", w.consumer("Project", api), 8)
	w.ready()
	ctx := context.Background()
	w.create(w.configMap("held", web, 4))
	w.allocated("Organization", w.org, 4)

	me, err := quotaclaim.WhoAmI(ctx, srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	claimer := &quotaclaim.Claimer{Client: w.quota, Namespace: w.ns, Service: "compute", Identity: me}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "machine", Namespace: w.ns}} // no data.project: no policy charges it
	w.create(owner)
	for _, c := range []struct {
		consumer quotav1alpha1.ConsumerRef
		amount   int64
		fits     bool
		limit    string // the limit a refusal names
	}{
		{w.consumer("Project", web), 2, true, ""},
		{w.consumer("Project", web), 3, false, "has 2 of 6 available (this limit refused"},  // the project's own limit
		{w.consumer("Project", api), 7, false, "has 6 of 10 available (this limit refused"}, // fits the project's 8; the organization has 6 left
		{w.consumer("Project", api), 6, true, ""},
		{w.consumer("Organization", w.org), 1, false, "charges Project.resourcemanager.miloapis.com consumers"}, // the registration charges projects only
	} {
		what := fmt.Sprintf("%d cores of %s %s", c.amount, c.consumer.Kind, c.consumer.Name)
		requests := []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(w.rt), Amount: c.amount}}
		checked, err := claimer.Check(ctx, quotaclaim.OwnerOf(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap")), c.consumer, requests)
		if err != nil {
			t.Fatalf("Check of %s: %v", what, err)
		}
		claim := claimer.Claim(quotaclaim.OwnerOf(owner, corev1.SchemeGroupVersion.WithKind("ConfigMap")), c.consumer, requests)
		claim.TypeMeta = metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceClaim"}
		got, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, reviewOf(t, claim), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("reviewing %s: %v", what, err)
		}
		o := got.Status.Objects[0]
		if (checked.Phase == quotaclaim.Granted) != c.fits || (o.Result == quotav1alpha1.ReviewFits) != c.fits || got.Status.Fits != c.fits {
			t.Fatalf("%s: Check %s (%s), the review %s (%s); want fits=%v", what, checked.Phase, checked.Message, o.Result, o.Message, c.fits)
		}
		if c.fits {
			if len(o.Charges) != 1 || o.Charges[0].Amount != c.amount {
				t.Fatalf("%s: the review charges %+v", what, o.Charges)
			}
			continue
		}
		// The decision's words, without what only the review's message
		// adds: a quota refusal's prefix and the portal's link, as admission
		// words it; for an invalid claim, what to fix.
		decision, reason := o.Message, quotav1alpha1.ReviewReasonInvalid
		if _, rest, ok := strings.Cut(o.Message, quota.RefusalPrefix+": "); ok {
			decision, reason = rest, quotav1alpha1.ReviewReasonQuotaExceeded
			decision, _, _ = strings.Cut(decision, "; to ask for a higher limit")
		} else if _, rest, ok := strings.Cut(o.Message, "("+string(quota.ValidationFailed)+"): "); ok {
			decision, _, _ = strings.Cut(rest, "; fix its consumerRef")
		}
		if o.Reason != reason || !strings.Contains(decision, c.limit) {
			t.Fatalf("%s: the review refused it %s: %q; want %s naming %q", what, o.Reason, o.Message, reason, c.limit)
		}
		if !strings.HasSuffix(checked.Message, quotav1alpha1.CheckWouldNotBeGranted+": "+decision) {
			t.Fatalf("%s: Check says\n  %s\nthe review's decision is\n  %s", what, checked.Message, decision)
		}
	}
	w.allocated("Organization", w.org, 4)
	w.allocated("Project", api, 0)
	if n := len(w.claims()); n != 1 {
		t.Fatalf("%d claims after the checks and reviews; only the held ConfigMap's should exist", n)
	}
}
