package charge

import "k8s.io/apiserver/pkg/admission"

// ReviewPassExtra is the user extra a QuotaReview's dry runs carry. A
// review sends each object it reviews through the server's whole chain as
// a dry run — schema defaults, built-in defaulting, mutating webhooks and
// policies, validation — to read the object as its apply would store it;
// quota is then decided for all of them together, in order, by the review
// itself. Those dry runs skip the charging steps (and a dry-run claim's
// own check): each would be decided alone, not after the objects before
// it. Only an identity allowed to impersonate user extras sets it (the
// server's loopback; docs/security.md), and it is honoured on dry runs
// only, which take nothing.
const ReviewPassExtra = "quota.miloapis.com/review-pass"

// ReviewPass reports whether a request is one of a QuotaReview's dry runs.
func ReviewPass(a admission.Attributes) bool {
	if !a.IsDryRun() || a.GetUserInfo() == nil {
		return false
	}
	_, ok := a.GetUserInfo().GetExtra()[ReviewPassExtra]
	return ok
}
