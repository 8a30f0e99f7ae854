package charge

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// ReviewItem is one object of a QuotaReview, as its apply would reach
// admission.
type ReviewItem struct {
	Attributes admission.Attributes
	Objects    admission.ObjectInterfaces
	// Info is the request line its apply would have (templates read it).
	Info *genericapirequest.RequestInfo
	// Claim is set when the object is a ResourceClaim the review names:
	// after the policy steps (which charge no claim) it is charged as
	// itself (ReviewClaim).
	Claim *quotav1alpha1.ResourceClaim
}

// Reviewed is what the steps came to for one ReviewItem.
type Reviewed struct {
	// Refused is the answer its apply would get before the engine (an
	// APIStatus: 403, 409, 422, …); nil when it reached the decision or
	// nothing charges it.
	Refused error
	// Step is what the engine was asked (Step.Asked), at Index among the
	// review's steps; not asked when nothing charges the object.
	Step  *Step
	Index int
	// Refusal is the quota refusal's words, as admission would refuse the
	// object, when the engine did not grant its step.
	Refusal string
}

// Review runs the steps for every object of a review, in Review mode, as
// requester u's applies would run them (a ResourceClaim of the review
// authorized with az), then asks the engine for all the steps at once, in
// order, taking nothing (Decide). An answer that is no refusal of an
// object (a read or the engine not answering: 429, 503, 504) fails the
// review: err, and nothing is asked.
func (ch *Charger) Review(ctx context.Context, az authorizer.Authorizer, u user.Info, items []ReviewItem) ([]Reviewed, route.ReviewResult, error) {
	out := make([]Reviewed, len(items))
	var steps []route.ReviewStep
	for i, it := range items {
		octx := genericapirequest.WithRequestInfo(ctx, it.Info)
		res, err := ch.Charge(octx, Request{Attributes: it.Attributes, Objects: it.Objects, Mode: Review})
		step := res.Step
		if err == nil && it.Claim != nil {
			step, err = ReviewClaim(octx, az, u, it.Claim)
		}
		if err != nil {
			if retry(err) {
				return nil, route.ReviewResult{}, err
			}
			out[i].Refused = err
			continue
		}
		out[i].Step = step
		if step.Asked {
			out[i].Index = len(steps)
			steps = append(steps, step.Step)
		}
	}
	if len(steps) == 0 {
		return out, route.ReviewResult{}, nil
	}
	res, err := ch.Decide(ctx, steps)
	if err != nil {
		return nil, res, err
	}
	for i, it := range items {
		if out[i].Step == nil || !out[i].Step.Asked {
			continue
		}
		if r := res.Steps[out[i].Index]; !r.Granted {
			out[i].Refusal = refusal.Review(it.Attributes.GetKind().Kind, it.Attributes.GetName(), out[i].Step.Step, r, ch.increaseLink)
		}
	}
	return out, res, nil
}

// retry reports whether err is a server not answering now rather than a
// refusal of the object.
func retry(err error) bool {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		return false
	}
	switch st.Status().Code {
	case 429, 503, 504:
		return true
	}
	return false
}
