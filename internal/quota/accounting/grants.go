package accounting

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// ValidateGrant checks a grant against the active registrations.
func (e *Accounts) ValidateGrant(g quota.Grant) quota.Validity {
	seen := map[string]bool{}
	for _, a := range g.Allowances {
		if seen[a.ResourceType] {
			return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseDuplicateResourceType, Message: fmt.Sprintf("resource type %s is listed twice; merge its buckets into one allowance", a.ResourceType)}
		}
		seen[a.ResourceType] = true
		r, ok := e.activeRegistration(a.ResourceType)
		if !ok {
			return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseResourceTypeNotRegistered, Message: fmt.Sprintf("resource type %s is not registered; create a ResourceRegistration for it or fix the allowance", a.ResourceType)}
		}
		if v, ok := grantKindAllowed(g, r); !ok {
			return v
		}
	}
	return quota.Validity{Valid: true, Reason: quota.ReasonGrantActive, Message: quota.GrantActiveMessage}
}

// UpsertGrant adds or replaces a grant. An invalid grant contributes nothing.
func (e *Accounts) UpsertGrant(g quota.Grant) {
	e.grants[g.UID] = g
	e.applyGrant(g.UID, g)
}

// RemoveGrant forgets a grant; its contributions to limits disappear.
func (e *Accounts) RemoveGrant(uid string) {
	if _, ok := e.grants[uid]; !ok {
		return
	}
	e.withdrawGrant(uid)
	e.groupChanged(uid, e.grants[uid], false)
	e.dropHoldOf(e.grants[uid])
	delete(e.grants, uid)
	delete(e.grantValid, uid)
	delete(e.changedGrants, uid)
}

// GrantValidity is the validity of a known grant.
func (e *Accounts) GrantValidity(uid string) (quota.Validity, bool) {
	v, ok := e.grantValid[uid]
	return v, ok
}

func (e *Accounts) applyGrant(uid string, g quota.Grant) {
	e.withdrawGrant(uid)
	v := e.ValidateGrant(g)
	if old, ok := e.grantValid[uid]; !ok || old != v {
		e.changedGrants[uid] = struct{}{}
	}
	e.grantValid[uid] = v
	e.groupChanged(uid, g, v.Valid)
	e.settleHold(g)
	if !v.Valid {
		return
	}
	e.sharedRoom = true
	for _, a := range g.Allowances {
		s := e.seriesFor(seriesKey{g.Consumer, a.ResourceType})
		for _, gb := range a.Buckets {
			b := e.bucketFor(s, gb.Dims)
			c := b.grants[uid]
			c.Namespace, c.Name, c.Generation = g.Namespace, g.Name, g.Generation
			c.Amount = quota.AddSat(c.Amount, gb.Amount)
			b.setGrant(uid, c)
			e.touch(s, gb.Dims.Key())
		}
		e.dirty[g.Consumer] = true
	}
}

// withdrawGrant removes every contribution of a grant.
func (e *Accounts) withdrawGrant(uid string) {
	old, ok := e.grants[uid]
	if !ok {
		return
	}
	for _, a := range old.Allowances {
		s, ok := e.series[seriesKey{old.Consumer, a.ResourceType}]
		if !ok {
			continue
		}
		for key, b := range s.buckets {
			if b.removeGrant(uid) {
				e.touch(s, key)
			}
		}
		e.prune(s)
	}
}

// grantKindAllowed checks that a grant's consumer (or, for a group, the
// kind it selects) is a kind the registration charges at some level.
func grantKindAllowed(g quota.Grant, r quota.Registration) (quota.Validity, bool) {
	kind := kindOf(g.Consumer)
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
