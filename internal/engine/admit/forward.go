package admit

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/record"
)

// Forwarder asks the replica whose engine leads for a decision this
// replica's engine cannot make because it does not lead (docs/replicas.md).
// It answers exactly what the leader's Handle answers its own admission:
// the same result, or the same errors (*NameTakenError, ErrBusy,
// ErrNotLeader when no leader can be reached).
type Forwarder interface {
	DecideCreate(ctx context.Context, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (AdmitResult, error)
}

type forwarding struct{ f Forwarder }

// ForwardTo makes the handle ask f while this replica does not lead; nil
// stops forwarding (creates are then refused as "retry").
func (h *Handle) ForwardTo(f Forwarder) {
	if f == nil {
		h.forward.Store(nil)
		return
	}
	h.forward.Store(&forwarding{f: f})
}

type forwardedKey struct{}

// Forwarded marks ctx as a decision another replica forwarded here: it is
// decided by this replica's engine or refused, never forwarded again.
func Forwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

// forwarder is where a decision goes when this replica does not lead; nil
// when it must be refused instead.
func (h *Handle) forwarder(ctx context.Context) Forwarder {
	if ctx.Value(forwardedKey{}) != nil {
		return nil
	}
	if fw := h.forward.Load(); fw != nil {
		return fw.f
	}
	return nil
}

// grantedBeforeLocked answers an attempt decided before: every claim it
// asks for is already held as a durable grant of the same object, policy and
// spec — the same create forwarded again after a timeout, or after a leader
// change (the new leader read the grants from the journal). It is granted
// once, by the first decision, and answered with it; never decided again,
// nor refused as a name collision. The cache's lock is held.
func (t *Term) grantedBeforeLocked(claims []*quotav1alpha1.ResourceClaim) (AdmitResult, bool) {
	if len(claims) == 0 {
		return AdmitResult{}, false
	}
	acc := t.Cache.AccountsLocked()
	res := AdmitResult{Granted: true}
	for _, c := range claims {
		uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
		k := record.Key(c.Namespace, c.Name)
		p := t.Cache.PendingLocked(k)
		if uid == "" || p == nil || p.Update || !p.Durable || p.ObjectUID != uid ||
			p.Policy != c.Annotations[quotav1alpha1.AnnotationPolicy] || !equality.Semantic.DeepEqual(p.Spec, c.Spec) {
			return AdmitResult{}, false
		}
		id := record.ProvisionalID(k)
		qc, ok := acc.Claim(id)
		d, decided := acc.Decision(id)
		if !ok || !decided {
			return AdmitResult{}, false
		}
		res.Claims = append(res.Claims, qc)
		res.Decisions = append(res.Decisions, d)
	}
	return res, true
}
