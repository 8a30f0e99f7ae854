package bookkeeping

import (
	"fmt"
	"reflect"
	"sort"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// UpsertRegistration adds or replaces a registration, and reports whether
// it changed; when it did, every grant is validated again.
func (bk *Books) UpsertRegistration(r quota.Registration) (changed bool) {
	bk.changedRegs[r.Name] = struct{}{}
	if old, ok := bk.regs[r.Name]; ok && reflect.DeepEqual(old, r) {
		return false // seen again (a resync, a status write): its status is written, nothing else changes
	}
	bk.regs[r.Name] = r
	bk.registrationsChanged()
	return true
}

// RemoveRegistration forgets a registration; false when it was not known.
// Every grant is validated again.
func (bk *Books) RemoveRegistration(name string) bool {
	if _, ok := bk.regs[name]; !ok {
		return false
	}
	delete(bk.regs, name)
	delete(bk.changedRegs, name)
	bk.registrationsChanged()
	return true
}

// registrationsChanged recomputes which registration is active for each
// resource type (the oldest; later duplicates are inactive), then every
// grant's validity and contributions.
func (bk *Books) registrationsChanged() {
	names := make([]string, 0, len(bk.regs))
	for n := range bk.regs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := bk.regs[names[i]], bk.regs[names[j]]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Name < b.Name
	})
	active := map[string]string{}
	for _, n := range names {
		r := bk.regs[n]
		if _, taken := active[r.ResourceType]; !taken && !r.Deleting {
			active[r.ResourceType] = n
		}
	}
	// A registration's validity depends on itself (marked by its caller)
	// and on which registration is active for its resource type: only the
	// registrations of a type whose active one changed are marked, not all
	// (every status write of one registration comes back as an update).
	for _, n := range names {
		rt := bk.regs[n].ResourceType
		if bk.active[rt] != active[rt] {
			bk.changedRegs[n] = struct{}{}
		}
	}
	bk.active = active
	for uid, g := range bk.grants {
		bk.applyGrant(uid, g)
	}
}

// RegistrationValidity says whether a registration is the active one for its
// resource type.
func (bk *Books) RegistrationValidity(name string) quota.Validity {
	r, ok := bk.regs[name]
	switch {
	case !ok:
		return quota.Validity{Reason: quota.ReasonRegistrationPending, Cause: quota.CauseNotFound, Message: "registration is not known"}
	case r.Deleting:
		return quota.Validity{Reason: quota.ReasonRegistrationPending, Cause: quota.CauseDeleting, Message: fmt.Sprintf("registration of %s is being deleted; grants and claims of %s are no longer valid", r.ResourceType, r.ResourceType)}
	case bk.active[r.ResourceType] != name:
		return quota.Validity{Reason: quota.ReasonValidationFailed, Cause: quota.CauseDuplicateResourceType, Message: fmt.Sprintf("resource type %s is already registered by ResourceRegistration %s; delete this duplicate", r.ResourceType, bk.active[r.ResourceType])}
	}
	return quota.Validity{Valid: true, Reason: quota.ReasonRegistrationActive, Message: quota.RegistrationActiveMessage}
}

// ActiveRegistration returns the active registration of a resource type.
func (bk *Books) ActiveRegistration(resourceType string) (quota.Registration, bool) {
	n, ok := bk.active[resourceType]
	if !ok {
		return quota.Registration{}, false
	}
	return bk.regs[n], true
}

// BaseUnitQuantity is what one base unit of a resource type is as a
// quantity, when its active registration declares it.
func (bk *Books) BaseUnitQuantity(resourceType string) (string, bool) {
	r, ok := bk.ActiveRegistration(resourceType)
	if !ok || r.BaseUnitQuantity == "" {
		return "", false
	}
	return r.BaseUnitQuantity, true
}

// RegistrationUsers counts the grants and claims that use a registration's
// resource type.
func (bk *Books) RegistrationUsers(resourceType string) (grants, claims int) {
	for _, g := range bk.grants {
		for _, a := range g.Allowances {
			if a.ResourceType == resourceType {
				grants++
				break
			}
		}
	}
	for k, s := range bk.series {
		if k.ResourceType == resourceType {
			claims += s.claims
		}
	}
	return grants, claims
}

// IsRegistered reports whether a resource type has an active registration.
func (bk *Books) IsRegistered(resourceType string) bool {
	_, ok := bk.active[resourceType]
	return ok
}

// RegisteredTypes are the resource types with an active registration.
func (bk *Books) RegisteredTypes() []string {
	out := make([]string, 0, len(bk.active))
	for rt := range bk.active {
		out = append(out, rt)
	}
	sort.Strings(out)
	return out
}
