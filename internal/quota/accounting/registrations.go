package accounting

import (
	"fmt"
	"sort"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// UpsertRegistration adds or replaces a registration. Grants and waiting
// claims are validated again.
func (e *Accounts) UpsertRegistration(r quota.Registration) {
	e.regs[r.Name] = r
	e.registrationsChanged()
}

// RemoveRegistration forgets a registration.
func (e *Accounts) RemoveRegistration(name string) {
	if _, ok := e.regs[name]; !ok {
		return
	}
	delete(e.regs, name)
	delete(e.changedRegs, name)
	e.registrationsChanged()
}

// registrationsChanged recomputes which registration is active for each
// resource type (the oldest; later duplicates are inactive), then every
// grant's validity, and marks every consumer for a new decision.
func (e *Accounts) registrationsChanged() {
	names := make([]string, 0, len(e.regs))
	for n := range e.regs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := e.regs[names[i]], e.regs[names[j]]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Name < b.Name
	})
	active := map[string]string{}
	for _, n := range names {
		r := e.regs[n]
		if _, taken := active[r.ResourceType]; !taken && !r.Deleting {
			active[r.ResourceType] = n
		}
	}
	e.active = active
	e.hierarchyChanged()
	for _, n := range names {
		e.changedRegs[n] = struct{}{}
	}
	for uid, g := range e.grants {
		e.applyGrant(uid, g)
	}
	for c := range e.consumers {
		e.dirty[c] = true
	}
}

// RegistrationValidity says whether a registration is the active one for its
// resource type.
func (e *Accounts) RegistrationValidity(name string) quota.Validity {
	r, ok := e.regs[name]
	switch {
	case !ok:
		return quota.Validity{Reason: quota.ReasonRegistrationPending, Cause: quota.CauseNotFound, Message: "registration is not known"}
	case r.Deleting:
		return quota.Validity{Reason: quota.ReasonRegistrationPending, Cause: quota.CauseDeleting, Message: fmt.Sprintf("registration of %s is being deleted; grants and claims of %s are no longer valid", r.ResourceType, r.ResourceType)}
	case e.active[r.ResourceType] != name:
		return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseDuplicateResourceType, Message: fmt.Sprintf("resource type %s is already registered by ResourceRegistration %s; delete this duplicate", r.ResourceType, e.active[r.ResourceType])}
	}
	return quota.Validity{Valid: true, Reason: quota.ReasonRegistrationActive, Message: quota.RegistrationActiveMessage}
}

// activeRegistration returns the active registration of a resource type.
func (e *Accounts) activeRegistration(resourceType string) (quota.Registration, bool) {
	n, ok := e.active[resourceType]
	if !ok {
		return quota.Registration{}, false
	}
	return e.regs[n], true
}

// BaseUnitQuantity is what one base unit of a resource type is as a
// quantity, when its active registration declares it.
func (e *Accounts) BaseUnitQuantity(resourceType string) (string, bool) {
	r, ok := e.activeRegistration(resourceType)
	if !ok || r.BaseUnitQuantity == "" {
		return "", false
	}
	return r.BaseUnitQuantity, true
}

// RegistrationUsers counts the grants and claims that use a registration's
// resource type.
func (e *Accounts) RegistrationUsers(resourceType string) (grants, claims int) {
	for _, g := range e.grants {
		for _, a := range g.Allowances {
			if a.ResourceType == resourceType {
				grants++
				break
			}
		}
	}
	for k, s := range e.series {
		if k.ResourceType == resourceType {
			claims += s.claims
		}
	}
	return grants, claims
}

// IsRegistered reports whether a resource type has an active registration.
func (e *Accounts) IsRegistered(resourceType string) bool {
	_, ok := e.active[resourceType]
	return ok
}

// RegisteredTypes are the resource types with an active registration.
func (e *Accounts) RegisteredTypes() []string {
	out := make([]string, 0, len(e.active))
	for rt := range e.active {
		out = append(out, rt)
	}
	sort.Strings(out)
	return out
}
