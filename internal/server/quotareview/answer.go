package quotareview

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

var claimsResource = quotav1alpha1.Resource("resourceclaims")

// decided fills in the engine's answer for every object asked of it.
func (rv *reviewRun) decided() {
	created := map[quota.ConsumerID]int{} // consumers the review creates, by object index
	for _, e := range rv.entries {
		if e.out.Operation == "Create" {
			gvk := e.obj.GroupVersionKind()
			created[quota.ConsumerID{APIGroup: gvk.Group, Kind: gvk.Kind, Namespace: e.obj.GetNamespace(), Name: e.obj.GetName()}] = int(e.out.Index)
			// a cluster-scoped consumer is named without a namespace
			created[quota.ConsumerID{APIGroup: gvk.Group, Kind: gvk.Kind, Name: e.obj.GetName()}] = int(e.out.Index)
		}
	}
	for _, e := range rv.entries {
		if e.step == nil {
			continue
		}
		res := rv.result.Steps[e.stepIndex]
		for _, c := range res.Charges {
			e.out.Charges = append(e.out.Charges, quotav1alpha1.QuotaReviewCharge{Policy: c.Policy, ConsumerRef: consumerRef(c.Cell.Consumer),
				ResourceType: c.Cell.ResourceType, Amount: c.New, Held: c.Held})
			if j, ok := created[c.Cell.Consumer]; ok && j < int(e.out.Index) {
				rv.note(fmt.Sprintf("objects[%d] charges %s, which objects[%d] creates: a consumer the review creates has no grants yet (GrantCreationPolicies are not simulated), so what is charged to it is reviewed against the quota it has now; review the objects charged to it once it exists",
					e.out.Index, consumerText(c.Cell.Consumer), j))
			}
		}
		kind, name := e.obj.GetKind(), e.obj.GetName()
		direct := e.obj.GroupVersionKind().GroupKind() == claimKind // a ResourceClaim of the review, no policy's
		switch {
		case direct && res.NameTaken != nil:
			e.refuse(quotav1alpha1.ReviewReasonNameTaken, apierrors.NewAlreadyExists(claimsResource, name).Error())
		case direct && !res.Granted && invalid(res.Decisions) != "":
			e.refuse(quotav1alpha1.ReviewReasonInvalid, fmt.Sprintf(
				"ResourceClaim %s would be stored and Denied (%s): %s; fix its consumerRef or requests, or the ResourceRegistration (this is not a quota denial)", name, quota.ValidationFailed, invalid(res.Decisions)))
		case res.NameTaken != nil:
			t := res.NameTaken
			e.refuse(quotav1alpha1.ReviewReasonNameTaken, apierrors.NewConflict(claimsResource, t.Claim, fmt.Errorf(
				"%v, so this %s cannot be charged and would not be stored; give the policy's claim template a name unique per object (for example generateName, or a name that includes {{ trigger.metadata.name }})", t, kind)).Error())
		case res.Granted:
			e.out.Result = quotav1alpha1.ReviewFits
		case invalid(res.Decisions) != "":
			e.refuse(quotav1alpha1.ReviewReasonInvalid, apierrors.NewInternalError(fmt.Errorf(
				"a ClaimCreationPolicy renders a claim for this %s that the registrations refuse: %s; fix the policy or the ResourceRegistration (this is not a quota denial)", kind, invalid(res.Decisions))).Error())
		default:
			e.refuse(quotav1alpha1.ReviewReasonQuotaExceeded, apierrors.NewForbidden(e.mapping.Resource.GroupResource(), name, errors.New(e.refusal)).Error())
		}
	}
}

func invalid(ds []quota.Decision) string {
	for _, d := range ds {
		if d.Outcome == quota.ValidationFailed {
			return d.Message
		}
	}
	return ""
}

func (rv *reviewRun) note(n string) {
	if !slices.Contains(rv.notes, n) {
		rv.notes = append(rv.notes, n)
	}
}

// status is the review's answer.
func (rv *reviewRun) status() quotav1alpha1.QuotaReviewStatus {
	st := quotav1alpha1.QuotaReviewStatus{User: rv.user.GetName(), Notes: rv.notes}
	first := -1
	for i, e := range rv.entries {
		st.Objects = append(st.Objects, e.out)
		if e.out.Result == quotav1alpha1.ReviewRefused {
			st.Refused++
			if first < 0 {
				first = i
			}
		}
	}
	refused := map[quota.BucketID]int64{}
	for _, e := range rv.entries {
		if e.step == nil || e.out.Reason != quotav1alpha1.ReviewReasonQuotaExceeded {
			continue
		}
		for _, d := range rv.result.Steps[e.stepIndex].Decisions {
			for _, r := range d.Requests {
				if r.Reason == quota.ReasonQuotaExceeded && r.Refused != nil {
					id := r.Refused.ID
					id.Dims = ""
					refused[id] += requested(e, r)
				}
			}
		}
	}
	for _, b := range rv.result.Buckets {
		id := b.Before.ID
		st.Buckets = append(st.Buckets, quotav1alpha1.QuotaReviewBucket{ConsumerRef: consumerRef(id.Consumer), ResourceType: id.ResourceType,
			Limit: b.Before.Limit, Unlimited: b.Before.Unlimited, Allocated: b.Before.Allocated, AllocatedAfter: b.After.Allocated,
			Take: b.After.Allocated - b.Before.Allocated, Refused: refused[id]})
	}
	st.Fits = st.Refused == 0
	n := len(rv.entries)
	switch {
	case st.Fits:
		st.Message = fmt.Sprintf("all %d objects fit, together, at every level: %s", n, takes(st.Buckets))
	default:
		e := rv.entries[first].out
		st.Message = fmt.Sprintf("%d of %d objects would be refused; the first is objects[%d] (%s %s): %s", st.Refused, n, e.Index, e.Kind, objectName(e), e.Message)
	}
	return st
}

// requested is what the refused object asked of the bucket's resource type.
func requested(e *entry, r quota.RequestResult) int64 {
	var n int64
	for _, c := range e.out.Charges {
		if c.ResourceType == r.ResourceType {
			n += c.Amount - c.Held
		}
	}
	return n
}

func takes(bs []quotav1alpha1.QuotaReviewBucket) string {
	var parts []string
	for _, b := range bs {
		if b.Take == 0 {
			continue
		}
		limit := "no limit at this level"
		if !b.Unlimited {
			limit = fmt.Sprintf("limit %d", b.Limit)
		}
		parts = append(parts, fmt.Sprintf("%s of %s %s/%s (%d allocated, %d after, %s)", signed(b.Take), b.ConsumerRef.Kind, b.ConsumerRef.Name, b.ResourceType, b.Allocated, b.AllocatedAfter, limit))
	}
	if len(parts) == 0 {
		return "nothing more is taken"
	}
	return "they would take " + strings.Join(parts, "; ")
}

func signed(n int64) string {
	if n > 0 {
		return fmt.Sprintf("+%d", n)
	}
	return fmt.Sprint(n)
}

func objectName(o quotav1alpha1.QuotaReviewObject) string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

func consumerRef(c quota.ConsumerID) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: c.APIGroup, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

func consumerText(c quota.ConsumerID) string {
	if c.Namespace == "" {
		return c.Kind + " " + c.Name
	}
	return c.Kind + " " + c.Namespace + "/" + c.Name
}
