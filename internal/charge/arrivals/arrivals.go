package arrivals

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Waiter asks the engine again while what a create needs arrives.
type Waiter struct {
	Handle *route.Handle
	// Dynamic reads consumer objects; nil: every consumer not known is
	// answered as not existing.
	Dynamic dynamic.Interface
}

// notKnownWait bounds how long a create waits for the engine to see a
// consumer that exists (created a moment before what is charged to it, as
// one kubectl apply of a directory does).
const notKnownWait = 5 * time.Second

// notKnownPoll is how often it asks again meanwhile.
const notKnownPoll = 100 * time.Millisecond

// Await follows a refusal because a claim's consumer is not known
// to the engine (quota.ReasonConsumerNotKnown): its levels above cannot be
// found without it, so nothing was taken. A consumer that exists was
// created a moment ago: the decision is asked again until the engine has
// seen it (bounded by notKnownWait, then 503 with Retry-After). One that
// does not exist is answered 429 with Retry-After naming it: applied later
// in the same sync, the retry is granted (docs/tenancy.md "Applies in any
// order"). Any other answer is returned as it is.
//
// answer is the request's answer when it is one of those; err an engine
// that did not answer a decision asked again.
func (w Waiter) Await(ctx context.Context, a admission.Attributes, claims []*quotav1alpha1.ResourceClaim, applying []string, res route.AdmitResult) (_ route.AdmitResult, answer, err error) {
	deadline := time.Now().Add(notKnownWait)
	for {
		ref, policy, ok := notKnown(res, claims, applying)
		if !ok {
			if !w.grantOnItsWay(ctx, res, claims, deadline) {
				return res, nil, nil
			}
		} else if answer := w.notKnownAnswer(ctx, a, ref, policy, deadline); answer != nil {
			return res, answer, nil
		}
		select {
		case <-ctx.Done():
			return res, nil, nil
		case <-time.After(notKnownPoll):
		}
		if res, err = w.Handle.DecideCreate(ctx, claims, a.IsDryRun()); err != nil || res.Granted {
			return res, nil, err
		}
	}
}

// notKnownAnswer is the answer to a create whose claim's consumer ref is
// not known to the engine: 429 when it does not exist, 503 when it exists
// and the engine has not seen it by deadline, nil to ask again.
func (w Waiter) notKnownAnswer(ctx context.Context, a admission.Attributes, ref quotav1alpha1.ConsumerRef, policy string, deadline time.Time) error {
	_, exists, err := w.consumerObject(ctx, ref)
	what := fmt.Sprintf("%s %s", a.GetKind().Kind, a.GetName())
	charged := fmt.Sprintf("ClaimCreationPolicy %s charges this %s to %s", policy, a.GetKind().Kind, claimName(ref))
	switch {
	case err != nil:
		return refusal.NotSeenYet(a.GetResource().GroupResource(), a.GetName(), fmt.Sprintf(
			"%s, which the quota engine does not know yet, and reading it failed (%v); the %s was not created and nothing was taken: retry", charged, err, what))
	case !exists:
		return refusal.NotYet(a.GetResource().GroupResource(), a.GetName(), fmt.Sprintf(
			"%s, which does not exist yet: its quota (and its parent's, which limits it) cannot be checked without it; the %s was not created and nothing was taken: create %s first, then retry (applied in the same sync, the retry succeeds)",
			charged, what, claimName(ref)))
	case time.Now().After(deadline):
		return refusal.NotSeenYet(a.GetResource().GroupResource(), a.GetName(), fmt.Sprintf(
			"%s, created a moment ago, which the quota engine has not seen yet (waited %s); the %s was not created and nothing was taken: retry in a moment",
			charged, notKnownWait, what))
	}
	return nil
}

// newTenant is how recently a consumer was created for a refusal "no grant
// at any level" of its claims to wait for a grant: GrantCreationPolicies
// give a new Organization or Project its grants moments after it is stored
// (one apply of an Organization and its Projects charges the Organization
// before the policy's grant is written).
const newTenant = 15 * time.Second

// grantOnItsWay reports whether a refusal is worth asking again before
// deadline: a claim refused because no level of it has any grant, whose
// consumer was created within newTenant.
func (w Waiter) grantOnItsWay(ctx context.Context, res route.AdmitResult, claims []*quotav1alpha1.ResourceClaim, deadline time.Time) bool {
	if time.Now().After(deadline) {
		return false
	}
	for i, d := range res.Decisions {
		for _, r := range d.Requests {
			if r.Reason != quota.ReasonQuotaExceeded || i >= len(claims) || !noGrant(r) {
				continue
			}
			obj, exists, err := w.consumerObject(ctx, claims[i].Spec.ConsumerRef)
			if err == nil && exists && time.Since(obj.GetCreationTimestamp().Time) < newTenant {
				return true
			}
		}
	}
	return false
}

// noGrant reports whether a request was refused with no grant at any of
// its levels (its limit 0).
func noGrant(r quota.RequestResult) bool {
	for _, l := range r.Levels {
		if len(l.Bucket.Grants) > 0 {
			return false
		}
	}
	return true
}

// notKnown finds a claim refused because its consumer is not known, and the
// policy that rendered it.
func notKnown(res route.AdmitResult, claims []*quotav1alpha1.ResourceClaim, applying []string) (quotav1alpha1.ConsumerRef, string, bool) {
	for i, d := range res.Decisions {
		for _, r := range d.Requests {
			if r.Reason == quota.ReasonConsumerNotKnown && i < len(claims) {
				p := ""
				if i < len(applying) {
					p = applying[i]
				}
				return claims[i].Spec.ConsumerRef, p, true
			}
		}
	}
	return quotav1alpha1.ConsumerRef{}, "", false
}

func claimName(ref quotav1alpha1.ConsumerRef) string { return ref.Kind + " " + ref.Name }

// consumerResources are the consumer kinds whose existence a refusal
// checks; any other is reported as not existing.
var consumerResources = map[quota.GroupKind]schema.GroupVersionResource{
	{Group: rmv1alpha1.GroupName, Kind: "Organization"}: rmv1alpha1.SchemeGroupVersion.WithResource("organizations"),
	{Group: rmv1alpha1.GroupName, Kind: "Project"}:      rmv1alpha1.SchemeGroupVersion.WithResource("projects"),
	{Kind: "Namespace"}: {Version: "v1", Resource: "namespaces"},
}

// consumerObject reads a consumer object (a quorum read: a consumer
// created a moment ago counts); false when it does not exist.
func (w Waiter) consumerObject(ctx context.Context, ref quotav1alpha1.ConsumerRef) (*unstructured.Unstructured, bool, error) {
	gvr, ok := consumerResources[quota.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}]
	if !ok || w.Dynamic == nil {
		return nil, false, nil
	}
	got, err := w.Dynamic.Resource(gvr).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return got, err == nil, err
}
