package accounting

import (
	"maps"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
)

// WhatIf applies hypothetical changes to the accounts, one after another,
// and undoes them all: a QuotaReview's simulation of applying a set of
// objects in order, each decided after the ones before it. Until Undo, no
// one else may use the accounts (the caller holds their lock throughout);
// after it they are as they were, but for the buckets marked changed (their
// numbers are the same again).
type WhatIf struct {
	e *Accounts
	// added are the claims decided or held here, in order.
	added []string
	// released are granted claims whose amounts were given back here.
	released []*claimState
	// sharedRoom and dirty are the accounts' marks as they were, to be put
	// back: a simulation leaves no claim to decide again.
	sharedRoom bool
	roomAt     map[quota.ConsumerID]struct{}
	dirty      map[quota.ConsumerID]dirtyMark
	// before is each bucket drawn from, as it was when first drawn from.
	before map[bookkeeping.Key]seen
	order  []bookkeeping.Key
}

type dirtyMark struct{ set, roomGained bool }

type seen struct {
	series *bookkeeping.Series
	status quota.BucketStatus
}

// WhatIf begins a simulation.
func (e *Accounts) WhatIf() *WhatIf {
	return &WhatIf{e: e, sharedRoom: e.sharedRoom, roomAt: maps.Clone(e.roomAt), dirty: map[quota.ConsumerID]dirtyMark{}, before: map[bookkeeping.Key]seen{}}
}

// Decide adds claims and decides them together, as DecideTogether: granted,
// they stay allocated for the rest of the simulation; refused, they are
// forgotten at once and hold nothing.
func (w *WhatIf) Decide(claims []quota.Claim) (map[string]quota.Decision, bool) {
	uids := make([]string, 0, len(claims))
	for _, c := range claims {
		w.markDirty(c.Consumer)
		w.e.AddClaim(c)
		w.seeClaim(c.UID)
		uids = append(uids, c.UID)
	}
	out, ok := w.e.DecideTogether(uids)
	if !ok {
		for _, uid := range uids {
			w.e.RemoveClaim(uid)
		}
		return out, false
	}
	w.added = append(w.added, uids...)
	return out, true
}

// Hold allocates a claim without a check, as a stored update's replacement
// claim is held (its growth was decided by Decide).
func (w *WhatIf) Hold(c quota.Claim) {
	w.markDirty(c.Consumer)
	w.e.AddClaim(c)
	w.seeClaim(c.UID)
	cs := w.e.claims[c.UID]
	if cs.decision.Outcome != quota.Granted {
		w.e.unwait(cs)
		w.e.allocate(cs, quota.GrantedDecision(c))
	}
	w.added = append(w.added, c.UID)
}

// Forget forgets a claim Decide or Hold added, giving back what it holds:
// an update's growth once its replacement claim is held.
func (w *WhatIf) Forget(uid string) {
	for i, a := range w.added {
		if a == uid {
			w.e.RemoveClaim(uid)
			w.added = append(w.added[:i], w.added[i+1:]...)
			return
		}
	}
}

// Release gives back what a granted claim holds, as its replacement's
// storing would; it holds it again at Undo. Claims not granted, or already
// released or added here, are left alone.
func (w *WhatIf) Release(uid string) {
	cs, ok := w.e.claims[uid]
	if !ok || cs.decision.Outcome != quota.Granted {
		return
	}
	for _, r := range w.released {
		if r == cs {
			return
		}
	}
	for _, a := range w.added {
		if a == uid {
			return
		}
	}
	w.markDirty(cs.claim.Consumer)
	w.seeClaim(uid)
	w.e.deallocate(cs)
	w.released = append(w.released, cs)
}

// WhatIfBucket is one bucket a simulation drew from: as it was, and as it is
// after the simulation's changes.
type WhatIfBucket struct {
	Before, After quota.BucketStatus
}

// Buckets are the overall buckets of every level the simulation's claims
// drew from, in the order first drawn from. Call it before Undo.
func (w *WhatIf) Buckets() []WhatIfBucket {
	out := make([]WhatIfBucket, 0, len(w.order))
	for _, k := range w.order {
		s := w.before[k]
		out = append(out, WhatIfBucket{Before: s.status, After: w.e.books.Status(s.series, s.series.Overall())})
	}
	return out
}

// Undo forgets every claim added and holds again what was released.
func (w *WhatIf) Undo() {
	for i := len(w.added) - 1; i >= 0; i-- {
		w.e.RemoveClaim(w.added[i])
	}
	for _, cs := range w.released {
		c := cs.claim
		for i, r := range c.Requests {
			for _, s := range cs.levels[i] {
				w.e.books.Charge(s, c.UID, c.Cluster, r)
			}
		}
	}
	w.added, w.released = nil, nil
	w.e.sharedRoom = w.sharedRoom
	w.e.roomAt = maps.Clone(w.roomAt)
	if w.e.roomAt == nil {
		w.e.roomAt = map[quota.ConsumerID]struct{}{}
	}
	for c, m := range w.dirty {
		if m.set {
			w.e.dirty[c] = m.roomGained
		} else {
			delete(w.e.dirty, c)
		}
	}
}

// markDirty remembers a consumer's mark before the simulation first touches
// it.
func (w *WhatIf) markDirty(c quota.ConsumerID) {
	if _, ok := w.dirty[c]; ok {
		return
	}
	v, set := w.e.dirty[c]
	w.dirty[c] = dirtyMark{set: set, roomGained: v}
}

// seeClaim remembers, before a claim is charged or uncharged, the buckets
// of every level it draws from.
func (w *WhatIf) seeClaim(uid string) {
	cs := w.e.claims[uid]
	for _, levels := range cs.levels {
		for _, s := range levels {
			k := s.Key()
			if _, ok := w.before[k]; ok {
				continue
			}
			w.before[k] = seen{series: s, status: w.e.books.Status(s, s.Overall())}
			w.order = append(w.order, k)
		}
	}
}
