package accounting

import (
	"sort"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
)

// AddClaim adds an undecided claim. Adding a known UID is a no-op: a claim's
// requests cannot change.
func (e *Accounts) AddClaim(c quota.Claim) {
	if _, ok := e.claims[c.UID]; ok {
		return
	}
	e.add(c, true)
}

// add adds a claim the accounts do not know, to the waiting ones if wait.
func (e *Accounts) add(c quota.Claim, wait bool) *claimState {
	e.refreshLevels()
	cs := &claimState{claim: c, decision: quota.Decision{Outcome: quota.Pending}, levels: make([][]*bookkeeping.Series, len(c.Requests))}
	e.claims[c.UID] = cs
	for i, r := range c.Requests {
		cs.levels[i] = e.levelsOf(c.Consumer, r.ResourceType)
		for _, s := range cs.levels[i] {
			s.Ref()
		}
	}
	q := e.consumers[c.Consumer]
	if q == nil {
		q = &consumerState{}
		e.consumers[c.Consumer] = q
	}
	if wait {
		e.wait(cs)
	}
	q.claims++
	cs.at = len(q.all)
	q.all = append(q.all, cs)
	if !e.dirty[c.Consumer] {
		e.dirty[c.Consumer] = false
	}
	return cs
}

// RestoreGranted records a claim that was granted before (by this or an
// earlier leader). It is allocated without a check: a grant is never
// revoked, even when the limit has since been lowered.
func (e *Accounts) RestoreGranted(c quota.Claim) {
	cs, known := e.claims[c.UID]
	switch {
	case !known:
		cs = e.add(c, false)
	case cs.decision.Outcome == quota.Granted:
		return
	default:
		e.unwait(cs)
	}
	e.allocate(cs, quota.Decision{}) // made when asked for (current)
}

// RemoveClaim forgets a claim and releases what it holds.
func (e *Accounts) RemoveClaim(uid string) {
	cs, ok := e.claims[uid]
	if !ok {
		return
	}
	delete(e.claims, uid)
	c := cs.claim
	if cs.decision.Outcome == quota.Granted {
		e.deallocate(cs)
	} else {
		e.unwait(cs)
	}
	for _, ls := range cs.levels {
		for _, s := range ls {
			s.Unref()
			e.books.Prune(s)
		}
	}
	if q := e.consumers[c.Consumer]; q != nil {
		last := len(q.all) - 1
		q.all[cs.at] = q.all[last]
		q.all[cs.at].at = cs.at
		q.all[last] = nil
		q.all = q.all[:last]
		if q.claims--; q.claims == 0 {
			delete(e.consumers, c.Consumer)
		}
	}
	if cs.decision.Outcome == quota.Granted {
		e.dirty[c.Consumer] = true
	}
}

// Decision returns the current decision on a claim.
func (e *Accounts) Decision(uid string) (quota.Decision, bool) {
	cs, ok := e.claims[uid]
	if !ok {
		return quota.Decision{}, false
	}
	return cs.current(), true
}

// current is the claim's decision. A pending claim's and a restored
// claim's are made when asked for: a rebuild restores a million granted
// claims whose decisions are written, if ever, one at a time.
func (cs *claimState) current() quota.Decision {
	if cs.decision.Requests == nil {
		switch cs.decision.Outcome {
		case quota.Pending:
			return quota.PendingDecision(cs.claim)
		case quota.Granted:
			return quota.GrantedDecision(cs.claim)
		}
	}
	return cs.decision
}

// Claim returns a known claim.
func (e *Accounts) Claim(uid string) (quota.Claim, bool) {
	cs, ok := e.claims[uid]
	if !ok {
		return quota.Claim{}, false
	}
	return cs.claim, true
}

// Knows reports whether a claim is known.
func (e *Accounts) Knows(uid string) bool {
	_, ok := e.claims[uid]
	return ok
}

// Rekey renames a claim: admission decides a claim before its object
// exists, under a provisional ID, and renames it to the UID it gets when it
// is created. The allocation moves with it.
func (e *Accounts) Rekey(old, uid string) bool {
	cs, ok := e.claims[old]
	if !ok || old == uid {
		return ok
	}
	if _, taken := e.claims[uid]; taken {
		return false
	}
	delete(e.claims, old)
	cs.claim.UID = uid
	e.claims[uid] = cs
	for _, ls := range cs.levels {
		for _, s := range ls {
			s.Rekey(old, uid)
		}
	}
	return true
}

// Waiting counts claims that are not granted.
func (e *Accounts) Waiting() int { return e.waitingClaims }

// Claims counts known claims.
func (e *Accounts) Claims() int { return len(e.claims) }

// wait puts a claim among its consumer's waiting claims, in creation order.
func (e *Accounts) wait(cs *claimState) {
	q := e.consumers[cs.claim.Consumer]
	i := sort.Search(len(q.waiting), func(i int) bool { return before(cs.claim, q.waiting[i].claim) })
	q.waiting = append(q.waiting, nil)
	copy(q.waiting[i+1:], q.waiting[i:])
	q.waiting[i] = cs
	e.waitingClaims++
	e.waiters[cs.claim.Consumer] = struct{}{}
	e.waitersPeak = max(e.waitersPeak, len(e.waiters))
}

// freshAbove is the size past which a set emptied is replaced rather than
// kept (bookkeeping.Fresh): below it, its room costs nothing worth an
// allocation per decision.
const freshAbove = bookkeeping.FreshAbove

// unwait takes a claim out of its consumer's waiting claims, if it is
// there.
func (e *Accounts) unwait(cs *claimState) {
	q := e.consumers[cs.claim.Consumer]
	if q == nil {
		return
	}
	for i, w := range q.waiting {
		if w == cs {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			e.waitingClaims--
			if len(q.waiting) == 0 {
				delete(e.waiters, cs.claim.Consumer)
				if len(e.waiters) == 0 && e.waitersPeak > freshAbove {
					e.waiters, e.waitersPeak = bookkeeping.Fresh(e.waiters), 0
				}
			}
			return
		}
	}
}

// before orders claims by creation time, then namespace, name and UID.
func before(a, b quota.Claim) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

func (e *Accounts) allocate(cs *claimState, d quota.Decision) {
	c := cs.claim
	for i, r := range c.Requests {
		for _, s := range cs.levels[i] {
			e.books.Charge(s, c.UID, c.Cluster, r)
		}
	}
	d.Outcome = quota.Granted
	cs.decision = d
}

func (e *Accounts) deallocate(cs *claimState) {
	c := cs.claim
	for i, r := range c.Requests {
		for j, s := range cs.levels[i] {
			e.books.Uncharge(s, c.UID, r)
			if j > 0 {
				e.roomGained(s.Key().Consumer)
			}
		}
	}
}
