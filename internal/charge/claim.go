package charge

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// A ResourceClaim created through the API (by an owning service, the claim
// library, or named in a QuotaReview) is its own rendering: no policy
// matches it. Its steps are the same, in the same order, with the two
// that do not apply left out: where it is (a plane's claim must name a
// consumer the plane may charge) → the requester's authorization on its
// consumer → the decision (stored claims are decided by the engine's
// claim controller; a dry run is answered now, taking nothing; a review
// returns the step).

var claimsResource = quotav1alpha1.Resource("resourceclaims")

// AuthorizeClaim is the authorization step for a claim created through
// the API: requester u may charge the claim's consumer (verb "claim" on
// it, docs/authorization.md); refused, a 403 on the claim named name (the
// request's name). claimguard asks it at admission.
func AuthorizeClaim(ctx context.Context, az authorizer.Authorizer, u user.Info, name string, c *quotav1alpha1.ResourceClaim) error {
	if err := claimauthz.AuthorizeClaim(ctx, az, u, c.Spec.ConsumerRef); err != nil {
		return apierrors.NewForbidden(claimsResource, name, err)
	}
	return nil
}

// ReviewClaim runs the steps for a claim a QuotaReview names, as its
// create would run them, up to the decision: the step is returned, the
// engine is asked nothing. In a plane the claim is placed where it would
// be kept, the plane's quota namespace at the root. A refusal is an
// APIStatus error, as the create would be answered.
func ReviewClaim(ctx context.Context, az authorizer.Authorizer, u user.Info, c *quotav1alpha1.ResourceClaim) (*Step, error) {
	if plane, ok := planes.From(ctx); ok {
		if err := governed.PlaneConsumer(plane, c.Spec.ConsumerRef); err != nil {
			return nil, apierrors.NewForbidden(claimsResource, c.Name, fmt.Errorf(
				"this ResourceClaim, reviewed in the control plane of %s %s, charges %s, and %v: name the plane's owner (%s %s), an Organization or a Project",
				plane.OwnerKind(), plane.Name, claimauthz.ConsumerName(c.Spec.ConsumerRef), err, plane.OwnerKind(), plane.Name))
		}
		c.Namespace = plane.QuotaNamespace()
	}
	if err := AuthorizeClaim(ctx, az, u, c.Name, c); err != nil {
		return nil, err
	}
	return &Step{Asked: true, Step: route.ReviewStep{Claims: []*quotav1alpha1.ResourceClaim{c}}, Policies: []string{""}}, nil
}

// CheckClaim is the decision step of a dry-run create of claim c (the
// claim library's Check): the engine's decision as things stand, taking
// nothing. It runs after admission has authorized the requester
// (claimguard), so a caller who may not charge the consumer learns
// nothing of its quota. Refused: 403 with the engine's message; granted:
// a warning saying so.
func CheckClaim(ctx context.Context, h *route.Handle, c *quotav1alpha1.ResourceClaim) error {
	res, err := h.DecideCreate(ctx, []*quotav1alpha1.ResourceClaim{c}, true)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("checking whether the claim would be granted: %v; retry in a moment", err))
	}
	if !res.Granted {
		msg := quotav1alpha1.CheckWouldNotBeGranted
		if len(res.Decisions) > 0 && res.Decisions[0].Message != "" {
			msg += ": " + res.Decisions[0].Message
		}
		return apierrors.NewForbidden(claimsResource, c.Name, errors.New(msg))
	}
	warning.AddWarning(ctx, "", quotav1alpha1.CheckWouldBeGranted+" (a dry run: nothing was taken)")
	return nil
}

// Decide is the decision step of a review: the engine is asked for all
// its steps at once, in order, taking nothing (route.Handle.Review, on the
// leader when this replica is not it). An engine that cannot answer is a
// 503 or 504 saying to retry.
func (ch *Charger) Decide(ctx context.Context, steps []route.ReviewStep) (route.ReviewResult, error) {
	dctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	res, err := ch.handle.Review(dctx, steps)
	if err != nil {
		if errors.Is(err, route.ErrNotLeader) {
			return res, apierrors.NewServiceUnavailable(fmt.Sprintf("the quota engine cannot review right now (%v); nothing was taken, retry in a few seconds", err))
		}
		return res, apierrors.NewTimeoutError(fmt.Sprintf("the quota engine did not answer the review within %s: %v; nothing was taken, retry", decideTimeout, err), 2)
	}
	return res, nil
}
