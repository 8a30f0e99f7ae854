package webhook

import (
	"sort"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// comparison is where a member cluster's objects and the quota plane's
// claims for it disagree. The reconcile acts on it; verify reports it.
type comparison struct {
	// claimed are the UIDs of the objects some claim names.
	claimed map[string]bool
	// suspect are claims whose object is not among the cluster's, older
	// than releaseAfter: their object is looked up live before anything is
	// said or done (a watch may lag).
	suspect []*quotav1alpha1.ResourceClaim
	// unclaimed are objects no claim names, in a stable order.
	unclaimed []memberObject
}

// compare compares objects (by UID) with claims. A claim younger than
// releaseAfter is never suspect: its object may still be being stored. A
// claim being deleted is neither suspect nor a reason to call its object
// claimed.
func compare(objects map[string]memberObject, claims []quotav1alpha1.ResourceClaim, now time.Time, releaseAfter time.Duration) comparison {
	out := comparison{claimed: map[string]bool{}}
	for i := range claims {
		c := &claims[i]
		if c.DeletionTimestamp != nil {
			continue
		}
		uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
		out.claimed[uid] = true
		if _, here := objects[uid]; !here && now.Sub(c.CreationTimestamp.Time) >= releaseAfter {
			out.suspect = append(out.suspect, c)
		}
	}
	for uid, o := range objects {
		if !out.claimed[uid] {
			out.unclaimed = append(out.unclaimed, o)
		}
	}
	sort.Slice(out.unclaimed, func(i, j int) bool { return out.unclaimed[i].uid < out.unclaimed[j].uid })
	return out
}
