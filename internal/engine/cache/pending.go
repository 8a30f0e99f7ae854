package cache

import (
	"slices"
	"strings"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// PendingLocked is the pending entry of a claim key, nil when none.
func (c *Cache) PendingLocked(key string) *formats.PendingClaim { return c.pending[key] }

// PendingCountLocked counts the pending entries.
func (c *Cache) PendingCountLocked() int { return len(c.pending) }

// Pending is the pending entry of key with its reported outcome, read under
// the lock (the outcome changes when its request ends).
func (c *Cache) Pending(key string) (p *formats.PendingClaim, out formats.Outcome, ended time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok = c.pending[key]
	if ok {
		out, ended = p.Outcome, p.Ended
	}
	return p, out, ended, ok
}

// ClaimStoredLocked reports whether the claim cache holds namespace/name.
func (c *Cache) ClaimStoredLocked(key string) bool { return c.claimStored(key) }

// HoldPending restores a grant recorded at admission (by this or an earlier
// leader) under its provisional ID.
func (c *Cache) HoldPending(p *formats.PendingClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.Durable = true // read from the journal
	c.AddPendingLocked(p)
	if p.Update {
		if len(p.Growth) > 0 {
			c.acc.RestoreGranted(p.GrowthClaim())
		}
		return
	}
	c.acc.RestoreGranted(p.ProvisionalClaim())
}

// AddPendingLocked records a pending entry (what it holds is the caller's).
func (c *Cache) AddPendingLocked(p *formats.PendingClaim) {
	k := p.Key()
	c.pending[k] = p
	m := c.pendingByObject[p.ObjectUID]
	if m == nil {
		m = map[string]struct{}{}
		c.pendingByObject[p.ObjectUID] = m
	}
	m[k] = struct{}{}
	for _, r := range p.Replaces {
		c.replacing[r.UID] = false
	}
}

// DropPendingLocked forgets a pending entry (not what it holds).
func (c *Cache) DropPendingLocked(p *formats.PendingClaim) {
	k := p.Key()
	if c.pending[k] == p {
		delete(c.pending, k)
	}
	if m := c.pendingByObject[p.ObjectUID]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(c.pendingByObject, p.ObjectUID)
		}
	}
	for _, r := range p.Replaces {
		delete(c.replacing, r.UID)
	}
}

// ForgetPendingLocked releases what a pending entry holds and forgets it: its
// object's change was refused. The claims an update would have replaced stay,
// unless they were deleted meanwhile.
func (c *Cache) ForgetPendingLocked(p *formats.PendingClaim) {
	if p.Update {
		c.acc.RemoveClaim(p.GrowthID())
		for _, r := range p.Replaces {
			if c.replacing[r.UID] { // deleted while it was being replaced
				c.forgetClaimLocked(r.UID)
			}
		}
	} else {
		c.acc.RemoveClaim(formats.ProvisionalID(p.Key()))
	}
	c.DropPendingLocked(p)
}

// ForgetPending forgets the pending entry of key, if any, releasing what it
// holds.
func (c *Cache) ForgetPending(key string) {
	c.mu.Lock()
	if p := c.pending[key]; p != nil {
		c.ForgetPendingLocked(p)
	}
	c.mu.Unlock()
	c.Notify()
}

// MarkEnded records how the request that made entries ended, for those
// still pending as that request's, and returns their keys.
func (c *Cache) MarkEnded(entries []*formats.PendingClaim, out formats.Outcome, at time.Time) []string {
	var keys []string
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range entries {
		// Only an entry still pending as this request's: one released when
		// admission ran again, or settled, says nothing of others that took
		// its key since.
		if c.pending[p.Key()] == p {
			p.Outcome, p.Ended = out, at
			keys = append(keys, p.Key())
		}
	}
	return keys
}

// Provisional is the claim and decision a create's grant is held under.
func (c *Cache) Provisional(key string) (quota.Claim, quota.Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := formats.ProvisionalID(key)
	qc, _ := c.acc.Claim(id)
	d, _ := c.acc.Decision(id)
	return qc, d
}

// Adopt counts a claim written for a pending entry instead of the entry
// (unless the claim cache saw it first and adopted it already).
func (c *Cache) Adopt(cl *quotav1alpha1.ResourceClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adoptLocked(cl)
}

// adoptLocked renames a pending grant to the UID of its written claim: the
// claim, stored granted, replaced the grant in the journal. It reports
// whether cl was such a claim.
func (c *Cache) adoptLocked(cl *quotav1alpha1.ResourceClaim) bool {
	k := formats.GrantKeyOf(cl)
	p, ok := c.pending[k]
	if ok && p.Update {
		return c.adoptUpdateLocked(p, cl)
	}
	if !ok || cl.Annotations[quotav1alpha1.AnnotationResourceUID] != p.ObjectUID || !convert.IsGranted(cl) {
		return false
	}
	uid := string(cl.UID)
	if !c.acc.Rekey(formats.ProvisionalID(k), uid) {
		return false
	}
	c.DropPendingLocked(p)
	c.claimKeys[uid] = formats.Key(cl.Namespace, cl.Name)
	c.indexClaimLocked(cl)
	return true
}

// AdoptUpdate counts the claim written for update p, found stored under
// its grant key, if p is still pending.
func (c *Cache) AdoptUpdate(p *formats.PendingClaim, stored *quotav1alpha1.ResourceClaim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return formats.GrantKeyOf(stored) == p.Key() && c.pending[p.Key()] == p && c.adoptUpdateLocked(p, stored)
}

// adoptUpdateLocked counts a claim written for an update, seen by the cache
// (possibly before the writer learned its transaction committed).
func (c *Cache) adoptUpdateLocked(p *formats.PendingClaim, cl *quotav1alpha1.ResourceClaim) bool {
	if string(cl.UID) != p.ClaimUID || !convert.IsGranted(cl) {
		return false
	}
	c.swapLocked(p, cl)
	return true
}

// Swap counts the claim that replaced update p's old claims, if p is still
// pending: the growth and the old claims go, the new claim (nil for a
// release) is restored as granted, in one step.
func (c *Cache) Swap(p *formats.PendingClaim, cl *quotav1alpha1.ResourceClaim) {
	c.mu.Lock()
	if c.pending[p.Key()] == p {
		c.swapLocked(p, cl)
	}
	c.mu.Unlock()
	c.Notify()
}

func (c *Cache) swapLocked(p *formats.PendingClaim, cl *quotav1alpha1.ResourceClaim) {
	c.acc.RemoveClaim(p.GrowthID())
	for _, r := range p.Replaces {
		c.forgetClaimLocked(r.UID)
	}
	if cl != nil {
		uid := string(cl.UID)
		c.acc.RestoreGranted(convert.Claim(cl))
		c.claimKeys[uid] = formats.Key(cl.Namespace, cl.Name)
		c.indexClaimLocked(cl)
	}
	c.DropPendingLocked(p)
}

// HeldClaim is a granted claim of an object.
type HeldClaim struct {
	Ref   formats.ReplacedClaim
	Claim quota.Claim
}

// ClaimsOfObjectLocked are the granted claims policy made for an object,
// sorted by namespace/name.
func (c *Cache) ClaimsOfObjectLocked(objectUID, policy string) []HeldClaim {
	var out []HeldClaim
	for _, oc := range c.objectClaims[objectUID] {
		uid := oc.claimUID
		if oc.policy != policy {
			continue
		}
		d, ok := c.acc.Decision(uid)
		if !ok || d.Outcome != quota.Granted {
			continue
		}
		cl, _ := c.acc.Claim(uid)
		out = append(out, HeldClaim{Ref: formats.ReplacedClaim{Namespace: cl.Namespace, Name: cl.Name, UID: uid}, Claim: cl})
	}
	slices.SortFunc(out, func(a, b HeldClaim) int { return strings.Compare(a.Ref.Key(), b.Ref.Key()) })
	return out
}

// PendingOfObjectLocked returns the pending entries of an object for which
// mine is true (made by the caller's request and not yet ended), and
// whether any other exists.
func (c *Cache) PendingOfObjectLocked(objectUID string, mine func(*formats.PendingClaim) bool) (own []*formats.PendingClaim, others bool) {
	for k := range c.pendingByObject[objectUID] {
		p := c.pending[k]
		if p == nil {
			continue
		}
		if p.Update && p.Outcome == formats.OutcomeUnknown && mine(p) {
			own = append(own, p)
		} else {
			others = true
		}
	}
	return own, others
}

// UpdatingLocked reports whether an update of the object is being decided.
func (c *Cache) UpdatingLocked(objectUID string) bool {
	_, busy := c.updating[objectUID]
	return busy
}

// BeginUpdateLocked marks an update of the object as being decided; pass the
// token to EndUpdate.
func (c *Cache) BeginUpdateLocked(objectUID string) uint64 {
	c.updateSeq++
	c.updating[objectUID] = c.updateSeq
	return c.updateSeq
}

// EndUpdate ends the decision BeginUpdateLocked began.
func (c *Cache) EndUpdate(objectUID string, token uint64) {
	c.mu.Lock()
	if c.updating[objectUID] == token {
		delete(c.updating, objectUID)
	}
	c.mu.Unlock()
}

// indexClaimLocked indexes a claim made by a policy by its object, so that
// an update finds what its object holds.
// objectClaim is a claim a policy made for an object.
type objectClaim struct {
	claimUID, policy string
}

func (c *Cache) indexClaimLocked(cl *quotav1alpha1.ResourceClaim) {
	obj, pol := cl.Annotations[quotav1alpha1.AnnotationResourceUID], cl.Annotations[quotav1alpha1.AnnotationPolicy]
	if obj == "" || pol == "" {
		return
	}
	uid := string(cl.UID)
	list := c.objectClaims[obj]
	for i := range list {
		if list[i].claimUID == uid {
			list[i].policy = pol
			c.claimObject[uid] = obj
			return
		}
	}
	c.objectClaims[obj] = append(list, objectClaim{claimUID: uid, policy: pol})
	c.claimObject[uid] = obj
}

func (c *Cache) unindexClaimLocked(claimUID string) {
	obj, ok := c.claimObject[claimUID]
	if !ok {
		return
	}
	delete(c.claimObject, claimUID)
	list := slices.DeleteFunc(c.objectClaims[obj], func(oc objectClaim) bool { return oc.claimUID == claimUID })
	if len(list) == 0 {
		delete(c.objectClaims, obj)
	} else {
		c.objectClaims[obj] = list
	}
}
