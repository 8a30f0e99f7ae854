package admit

import (
	"k8s.io/apimachinery/pkg/api/equality"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// attempt is what the engine holds of a create asked again.
type attempt int

const (
	// attemptNew: nothing of it is held; it is decided.
	attemptNew attempt = iota
	// attemptGranted: every claim it asks for is held as a durable grant;
	// it is answered with that grant.
	attemptGranted
	// attemptInFlight: its grant is held but its journal write has not
	// finished; it is answered once the write has (granted when it landed,
	// decided again when it failed and the grant was given back).
	attemptInFlight
)

// grantedBeforeLocked answers an attempt decided before: every claim it
// asks for is already held as a durable grant of the same object, policy and
// spec — the same create forwarded again after a timeout, or after a leader
// change (the new leader read the grants from the journal). It is granted
// once, by the first decision, and answered with it; never decided again,
// nor refused as a name collision. A grant of the same attempt whose write
// is still in flight is attemptInFlight. The cache's lock is held.
func (t *Term) grantedBeforeLocked(claims []*quotav1alpha1.ResourceClaim) (route.AdmitResult, []*formats.PendingClaim, attempt) {
	if len(claims) == 0 {
		return route.AdmitResult{}, nil, attemptNew
	}
	var entries []*formats.PendingClaim
	acc := t.Cache.AccountsLocked()
	res := route.AdmitResult{Granted: true}
	inFlight := false
	for _, c := range claims {
		uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
		k := formats.Key(c.Namespace, c.Name)
		p := t.Cache.PendingLocked(k)
		if uid == "" || p == nil || p.Update || p.ObjectUID != uid ||
			p.Policy != c.Annotations[quotav1alpha1.AnnotationPolicy] || !equality.Semantic.DeepEqual(p.Spec, c.Spec) {
			return route.AdmitResult{}, nil, attemptNew
		}
		entries = append(entries, p)
		if !p.Durable {
			inFlight = true
			continue
		}
		id := formats.ProvisionalID(k)
		qc, ok := acc.Claim(id)
		d, decided := acc.Decision(id)
		if !ok || !decided {
			return route.AdmitResult{}, nil, attemptNew
		}
		res.Claims = append(res.Claims, qc)
		res.Decisions = append(res.Decisions, d)
	}
	if inFlight {
		return route.AdmitResult{}, nil, attemptInFlight
	}
	return res, entries, attemptGranted
}
