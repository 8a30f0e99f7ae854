package bookkeeping

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// ValidateGrant checks a grant against the active registrations.
func (bk *Books) ValidateGrant(g quota.Grant) quota.Validity {
	seen := map[string]bool{}
	for _, a := range g.Allowances {
		if seen[a.ResourceType] {
			return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseDuplicateResourceType, Message: fmt.Sprintf("resource type %s is listed twice; merge its buckets into one allowance", a.ResourceType)}
		}
		seen[a.ResourceType] = true
		r, ok := bk.ActiveRegistration(a.ResourceType)
		if !ok {
			return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseResourceTypeNotRegistered, Message: fmt.Sprintf("resource type %s is not registered; create a ResourceRegistration for it or fix the allowance", a.ResourceType)}
		}
		if v, ok := grantKindAllowed(g, r); !ok {
			return v
		}
	}
	return quota.Validity{Valid: true, Reason: quota.ReasonGrantActive, Message: quota.GrantActiveMessage}
}

// UpsertGrant adds or replaces a grant and returns its validity. An invalid
// grant contributes nothing. A stored grant settles its budget hold.
func (bk *Books) UpsertGrant(g quota.Grant) quota.Validity {
	bk.grants[g.UID] = g
	return bk.applyGrant(g.UID, g)
}

// RemoveGrant forgets a grant; its contributions to limits disappear, and
// so does its budget hold. It returns the grant it forgot, false when the
// grant was not known.
func (bk *Books) RemoveGrant(uid string) (quota.Grant, bool) {
	g, ok := bk.grants[uid]
	if !ok {
		return quota.Grant{}, false
	}
	bk.withdrawGrant(uid)
	bk.dropHoldOf(g)
	delete(bk.grants, uid)
	delete(bk.grantValid, uid)
	delete(bk.phases, uid)
	delete(bk.changedGrants, uid)
	return g, true
}

// GrantValidity is the validity of a known grant.
func (bk *Books) GrantValidity(uid string) (quota.Validity, bool) {
	v, ok := bk.grantValid[uid]
	return v, ok
}

// Grant returns a known grant.
func (bk *Books) Grant(uid string) (quota.Grant, bool) {
	g, ok := bk.grants[uid]
	return g, ok
}

// Grants are the known grants, by UID, in no particular order.
func (bk *Books) Grants() iter.Seq2[string, quota.Grant] { return maps.All(bk.grants) }

func (bk *Books) applyGrant(uid string, g quota.Grant) quota.Validity {
	bk.withdrawGrant(uid)
	v := bk.ValidateGrant(g)
	if old, ok := bk.grantValid[uid]; !ok || old != v || bk.phases[uid] != g.Phase {
		bk.changedGrants[uid] = struct{}{}
	}
	bk.grantValid[uid] = v
	bk.phases[uid] = g.Phase
	bk.settleHold(g)
	if !v.Valid || !g.Counts() {
		// Invalid, or outside its time window: it contributes nothing.
		return v
	}
	for _, a := range g.Allowances {
		s := bk.SeriesFor(Key{g.Consumer, a.ResourceType})
		for _, gb := range a.Buckets {
			b := bk.bucketFor(s, gb.Dims)
			c, _, _ := b.grant(uid)
			c.Namespace, c.Name, c.Generation, c.ExpiresAt = g.Namespace, g.Name, g.Generation, g.Window.Until
			c.Amount = quota.AddSat(c.Amount, gb.Amount)
			b.setGrant(uid, c)
			bk.touch(s, gb.Dims.Key())
		}
	}
	return v
}

// withdrawGrant removes every contribution of a grant.
func (bk *Books) withdrawGrant(uid string) {
	old, ok := bk.grants[uid]
	if !ok {
		return
	}
	for _, a := range old.Allowances {
		s, ok := bk.series[Key{old.Consumer, a.ResourceType}]
		if !ok {
			continue
		}
		for key, b := range s.buckets {
			if b.removeGrant(uid) {
				bk.touch(s, key)
			}
		}
		bk.Prune(s)
	}
}

// grantKindAllowed checks that a grant's consumer (or, for a group, the
// kind it selects) is a kind the registration charges at some level.
func grantKindAllowed(g quota.Grant, r quota.Registration) (quota.Validity, bool) {
	kind := g.Consumer.GroupKind()
	if g.Group != nil {
		kind = g.Group.Kind
	}
	if kind == r.ConsumerType || slices.Contains(r.Levels, kind) {
		return quota.Validity{}, true
	}
	what := fmt.Sprintf("consumer %s", g.Consumer)
	if g.Group != nil {
		what = fmt.Sprintf("a group of %s consumers", kind)
	}
	levels := r.ConsumerType.String()
	if len(r.Levels) > 0 {
		names := []string{levels}
		for _, l := range r.Levels {
			names = append(names, l.String())
		}
		return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseConsumerTypeMismatch, Message: fmt.Sprintf("%s cannot receive %s: ResourceRegistration %s grants it to %s consumers (spec.consumerType and spec.parentConsumerTypes)",
			what, r.ResourceType, r.Name, strings.Join(names, ", "))}, false
	}
	return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseConsumerTypeMismatch, Message: fmt.Sprintf("%s cannot receive %s: ResourceRegistration %s grants it to %s consumers", what, r.ResourceType, r.Name, levels)}, false
}
