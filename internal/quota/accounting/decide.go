package accounting

import (
	"fmt"
	"slices"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
)

// Changed is a claim whose decision changed.
type Changed struct {
	UID      string
	Decision quota.Decision
}

// Decide decides the waiting claims of every consumer whose state changed,
// all together in creation order (before): when a level several consumers
// share gains room (an organization's limit raised), its projects' oldest
// waiting claims take it first, whichever project they are in. A claim is
// granted when every request fits in every bucket it draws from; then all
// its requests are allocated at once. A claim that does not fit holds
// nothing and keeps waiting; a later, smaller claim may still be granted.
// Decide returns the claims whose decision changed.
func (e *Accounts) Decide() []Changed {
	out, _ := e.DecideUpTo(-1)
	return out
}

// DecideUpTo is Decide granting at most max claims (max < 0: no bound).
// When the bound stops it, more is true and the rest is decided by a later
// call. Callers bound the grants that are recorded but not yet written.
func (e *Accounts) DecideUpTo(max int) (out []Changed, more bool) {
	e.refreshLevels()
	e.spreadSharedRoom()
	type candidate struct {
		consumer quota.ConsumerID
		cs       *claimState
	}
	var candidates []candidate
	if len(e.dirty) > e.dirtyPeak {
		e.dirtyPeak = len(e.dirty)
	}
	for c, roomGained := range e.dirty {
		e.visits++
		q := e.consumers[c]
		if q == nil {
			delete(e.dirty, c)
			continue
		}
		for _, cs := range q.waiting {
			if roomGained || cs.decision.Outcome == quota.Pending {
				candidates = append(candidates, candidate{c, cs}) // not: denied before and nothing was freed since
			}
		}
	}
	slices.SortStableFunc(candidates, func(a, b candidate) int {
		switch {
		case before(a.cs.claim, b.cs.claim):
			return -1
		case before(b.cs.claim, a.cs.claim):
			return 1
		}
		return 0
	})
	granted := 0
	taken := map[*claimState]bool{}
	left := map[quota.ConsumerID]bool{} // consumers with candidates not looked at (the bound)
	for _, cand := range candidates {
		cs := cand.cs
		if more {
			left[cand.consumer] = true
			continue
		}
		d := e.evaluate(cs)
		if d.Outcome == quota.Granted {
			if max >= 0 && granted >= max {
				more = true
				left[cand.consumer] = true
				continue
			}
			granted++
			e.allocate(cs, d)
			taken[cs] = true
			out = append(out, Changed{cs.claim.UID, d})
			continue
		}
		if !sameDecision(cs.decision, d) {
			out = append(out, Changed{cs.claim.UID, d})
		}
		cs.decision = d
	}
	for c := range e.dirty {
		q := e.consumers[c]
		if len(taken) > 0 {
			n := len(q.waiting)
			q.waiting = slices.DeleteFunc(q.waiting, func(cs *claimState) bool { return taken[cs] })
			e.waitingClaims -= n - len(q.waiting)
			if len(q.waiting) == 0 {
				delete(e.waiters, c)
			}
		}
		if !left[c] {
			delete(e.dirty, c)
		}
	}
	if len(e.dirty) == 0 && e.dirtyPeak > freshAbove {
		e.dirty, e.dirtyPeak = bookkeeping.Fresh(e.dirty), 0 // not the room of the most ever marked
	}
	return out, more
}

// DecideTogether decides several waiting claims as one: all are granted, or
// none is and none holds anything. Admission uses it when several policies
// apply to one create. It returns each claim's decision and whether all were
// granted.
func (e *Accounts) DecideTogether(uids []string) (map[string]quota.Decision, bool) {
	e.refreshLevels()
	out := make(map[string]quota.Decision, len(uids))
	var done []*claimState
	ok := true
	for _, uid := range uids {
		cs, known := e.claims[uid]
		if !known {
			return out, false
		}
		if cs.decision.Outcome == quota.Granted {
			out[uid] = cs.current()
			continue
		}
		d := e.evaluate(cs)
		out[uid] = d
		if d.Outcome != quota.Granted {
			ok = false
			cs.decision = d
			break
		}
		e.unwait(cs)
		e.allocate(cs, d)
		done = append(done, cs)
	}
	if ok {
		return out, true
	}
	for _, cs := range done { // undo: nothing is held unless everything is
		e.deallocate(cs)
		e.wait(cs)
		cs.decision = quota.Decision{Outcome: quota.QuotaExceeded, Message: "another claim of the same create exceeds its quota; nothing is allocated", Requests: cs.decision.Requests}
		out[cs.claim.UID] = cs.decision
	}
	return out, false
}

// evaluate decides a claim against the current state without changing it.
func (e *Accounts) evaluate(cs *claimState) quota.Decision {
	c := cs.claim
	if msg, ok := e.validateClaim(c); !ok {
		return quota.ValidationFailedDecision(c, msg)
	}
	results := make([]quota.RequestResult, len(c.Requests))
	var firstDenied string
	for i, r := range c.Requests {
		reg, _ := e.books.ActiveRegistration(r.ResourceType)
		res := e.check(c, r, reg, cs.levels[i])
		if res.Status == "Denied" && firstDenied == "" {
			firstDenied = res.Message
		}
		results[i] = res
	}
	if firstDenied == "" {
		return quota.Decision{Outcome: quota.Granted, Requests: results}
	}
	for i := range results {
		if results[i].Status == "Granted" {
			results[i].Status, results[i].Reason, results[i].Allocated = "Denied", quota.ReasonClaimDenied, 0
			results[i].Message = "this request fits, but nothing is allocated because another request of the claim exceeds its quota (claims are all or nothing)"
		}
	}
	return quota.Decision{Outcome: quota.QuotaExceeded, Requests: results, Message: firstDenied}
}

// validateClaim checks a claim against the registrations.
func (e *Accounts) validateClaim(c quota.Claim) (string, bool) {
	seen := map[string]bool{}
	for _, r := range c.Requests {
		if seen[r.ResourceType] {
			return fmt.Sprintf("resource type %s is requested twice; put the amounts in one request", r.ResourceType), false
		}
		seen[r.ResourceType] = true
		if r.Amount <= 0 {
			return fmt.Sprintf("request for %s asks for %d; amounts must be positive", r.ResourceType, r.Amount), false
		}
		reg, ok := e.books.ActiveRegistration(r.ResourceType)
		if !ok {
			return fmt.Sprintf("resource type %s is not registered; create a ResourceRegistration for it or fix the request", r.ResourceType), false
		}
		if c.Consumer.GroupKind() != reg.ConsumerType {
			return fmt.Sprintf("consumer %s cannot claim %s: ResourceRegistration %s charges %s consumers", c.Consumer, r.ResourceType, reg.Name, reg.ConsumerType), false
		}
		if c.ResourceRef != nil {
			allowed := false
			for _, gk := range reg.Claiming {
				if gk == *c.ResourceRef {
					allowed = true
					break
				}
			}
			if !allowed {
				names := make([]string, len(reg.Claiming))
				for i, gk := range reg.Claiming {
					names[i] = gk.String()
				}
				return quota.NotClaimingMessage(c.ResourceRef.String(), r.ResourceType, reg.Name, names), false
			}
		}
	}
	return "", true
}

// unplaced reports whether a consumer cannot be placed in its hierarchy:
// the registration limits it at a level above its own kind, and the engine
// has no record of it (it does not exist, or its watch has not delivered it
// yet). Deciding with its own buckets alone would skip the levels above —
// a Project's claims granted past its Organization's limit — so its claims
// wait instead.
func (e *Accounts) unplaced(c quota.ConsumerID, reg quota.Registration) bool {
	if _, known := e.info[c]; known || c.IsGroup() {
		return false
	}
	for _, l := range reg.Levels {
		if l != c.GroupKind() {
			return true
		}
	}
	return false
}

// check decides one request against its levels.
func (e *Accounts) check(c quota.Claim, r quota.Request, reg quota.Registration, levels []*bookkeeping.Series) quota.RequestResult {
	res := quota.RequestResult{ResourceType: r.ResourceType, Bucket: quota.BucketID{Consumer: c.Consumer, ResourceType: r.ResourceType, Dims: ""}}
	if e.unplaced(c.Consumer, reg) {
		res.Status, res.Reason, res.Message = "Denied", quota.ReasonConsumerNotKnown, quota.NotKnownMessage(c, r, reg)
		return res
	}
	refused, limited := -1, false
	for j, s := range levels {
		if !s.HasGrant() {
			continue
		}
		limited = true
		if refused < 0 && s.Short(r) != nil {
			refused = j
		}
	}
	if limited && refused < 0 {
		res.Status, res.Reason, res.Allocated = "Granted", quota.ReasonQuotaAvailable, r.Amount
		return res
	}
	if !limited {
		refused = 0 // no grant at any level: the claim's own limit, 0
	}
	res.Status, res.Reason = "Denied", quota.ReasonQuotaExceeded
	for j, s := range levels {
		ls := quota.LevelStatus{Consumer: s.Key().Consumer, Limited: s.HasGrant() || j == refused, Refused: j == refused}
		b := s.Tightest(r)
		if ls.Refused {
			b = s.Short(r)
		}
		if b == nil {
			b = s.Overall()
		}
		ls.Bucket = e.books.Status(s, b)
		if ls.Refused {
			st := ls.Bucket
			res.Refused = &st
		}
		res.Levels = append(res.Levels, ls)
	}
	others := 0
	for j, ls := range res.Levels {
		if j != refused && ls.Limited {
			others++
		}
	}
	if !limited {
		// No grant anywhere: no bucket to name, and nothing to release.
		ids := make([]quota.ConsumerID, 0, len(levels))
		for _, s := range levels {
			ids = append(ids, s.Key().Consumer)
		}
		res.Message = quota.NoGrantMessage(c, r, reg, ids)
	} else if refused == 0 && others == 0 {
		// One level decided it, as before hierarchies: the message tools
		// and people know.
		s := levels[0]
		b := s.Short(r)
		res.Message = quota.ExceededMessage(c, r, reg, quota.BucketID{Consumer: c.Consumer, ResourceType: r.ResourceType, Dims: b.Dims().Key()}, b.Limit(), b.Allocated())
	} else {
		res.Message = quota.LevelsMessage(c, r, reg, res.Levels)
	}
	res.Message += res.Refused.WhereText() // across member clusters, where the usage is
	return res
}

func sameDecision(a, b quota.Decision) bool {
	if a.Outcome != b.Outcome || a.Message != b.Message || len(a.Requests) != len(b.Requests) {
		return false
	}
	for i := range a.Requests {
		x, y := a.Requests[i], b.Requests[i]
		if x.ResourceType != y.ResourceType || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.Allocated != y.Allocated || x.Bucket != y.Bucket || !slices.EqualFunc(x.Levels, y.Levels, sameLevel) {
			return false
		}
	}
	return true
}

func sameLevel(a, b quota.LevelStatus) bool {
	return a.Consumer == b.Consumer && a.Limited == b.Limited && a.Refused == b.Refused &&
		a.Bucket.ID == b.Bucket.ID && a.Bucket.Limit == b.Bucket.Limit && a.Bucket.Allocated == b.Bucket.Allocated
}
