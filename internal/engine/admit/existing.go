package admit

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// An object that already exists when a policy version comes into force
// (created while the policy was disabled, before it existed, or before an
// edit widened its trigger) is charged as if its create had just been
// admitted: its claim is held as a pending grant in the
// journal and written by the settler, so a leader change in between loses
// nothing. Unlike a create it is granted even beyond the limit — the object
// exists, and refusing its claim would leave it uncharged for ever — and the
// bucket then shows that it is over. docs/exactly-once.md, "Existing objects",
// has the argument.

// ExistingResult is what one ChargeExisting call did.
type ExistingResult struct {
	// Charged are the keys of the claims charged.
	Charged []string
	// OverLimit counts the charges that did not fit their limits.
	OverLimit int
	// Held are the objects that held a claim of the policy already
	// (charged by their create or update, or by an earlier pass).
	Held []string
	// Busy are the objects not charged because another change of them is
	// being charged (a create's or update's claim not yet written): charge
	// them again once it settles.
	Busy []string
	// Refused are the objects not charged and why: the claim's name is
	// taken, or the registrations refuse what it asks.
	Refused map[string]string
}

// ChargeExisting charges existing objects the claims policy renders for
// them, each claim naming its object by the annotation
// quota.miloapis.com/resource-uid. An object that already holds a granted
// claim of policy is skipped, so a second call charges nothing twice. The
// grants are durable (in the journal) when it returns.
func (t *Term) ChargeExisting(ctx context.Context, policy string, claims []*quotav1alpha1.ResourceClaim) (ExistingResult, error) {
	if err := t.lockWithRoom(ctx); err != nil {
		return ExistingResult{}, err
	}
	res, entries := t.chargeExistingLocked(policy, claims, metav1.Now())
	t.Cache.Unlock()
	if len(entries) == 0 {
		return res, nil
	}
	if err := t.record(ctx, entries, "a stored ResourceClaim or a claim being admitted"); err != nil {
		return ExistingResult{}, err
	}
	// The objects were stored when listed: their claims are written now.
	for _, p := range entries {
		t.Settle(p.Key())
	}
	return res, nil
}

// chargeExistingLocked holds the claims of objects that hold none of policy
// as pending entries, the cache's lock held.
func (t *Term) chargeExistingLocked(policy string, claims []*quotav1alpha1.ResourceClaim, now metav1.Time) (ExistingResult, []*formats.PendingClaim) {
	acc := t.Cache.AccountsLocked()
	res := ExistingResult{Refused: map[string]string{}}
	var entries []*formats.PendingClaim
	notMine := func(*formats.PendingClaim) bool { return false }
	for _, c := range claims {
		uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
		if len(t.Cache.ClaimsOfObjectLocked(uid, policy)) > 0 {
			res.Held = append(res.Held, uid)
			continue
		}
		if _, others := t.Cache.PendingOfObjectLocked(uid, notMine); others || t.Cache.UpdatingLocked(uid) {
			res.Busy = append(res.Busy, uid)
			continue
		}
		p := formats.NewPendingClaim(c, now)
		k := p.Key()
		if t.Cache.PendingLocked(k) != nil || t.Cache.ClaimStoredLocked(k) {
			res.Refused[uid] = fmt.Sprintf("the claim name %s is taken by another claim; give the policy's claim template a name unique per object", k)
			continue
		}
		qc := convert.Claim(c)
		qc.UID, qc.Created = formats.ProvisionalID(k), now.Time
		acc.AddClaim(qc)
		d, fits := acc.DecideTogether([]string{qc.UID})
		if !fits {
			if d[qc.UID].Outcome == quota.ValidationFailed {
				acc.RemoveClaim(qc.UID)
				res.Refused[uid] = d[qc.UID].Message
				continue
			}
			// Beyond the limit: granted all the same.
			acc.RestoreGranted(qc)
			res.OverLimit++
		}
		// Listed as stored a moment ago: the settler writes its claim without
		// looking it up again. Deleted meanwhile, the claim names an owner
		// that is gone and goes with it (the garbage collector, or
		// settle.ObjectWatch for a claim in another namespace).
		p.Outcome, p.Ended = formats.OutcomeStored, now.Time
		t.Cache.AddPendingLocked(p)
		entries = append(entries, p)
		res.Charged = append(res.Charged, k)
	}
	return res, entries
}
