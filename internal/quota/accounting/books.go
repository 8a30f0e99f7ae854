package accounting

import (
	"github.com/quotaplane/quotaplane/internal/quota"
)

// What Accounts keeps in its books (package bookkeeping), and what follows
// from each change there for the claims: levels computed again, consumers
// decided again. Reads that show a bucket move claims to their levels
// first.

// UpsertRegistration adds or replaces a registration. Grants and waiting
// claims are validated again.
func (e *Accounts) UpsertRegistration(r quota.Registration) {
	if e.books.UpsertRegistration(r) {
		e.registrationsChanged()
	}
}

// RemoveRegistration forgets a registration.
func (e *Accounts) RemoveRegistration(name string) {
	if e.books.RemoveRegistration(name) {
		e.registrationsChanged()
	}
}

// registrationsChanged follows the books once the active registrations
// changed and every grant was validated again: every claim's levels are
// computed again, each grant's new validity is followed, and every consumer
// with waiting claims is marked for a new decision (only those are decided).
func (e *Accounts) registrationsChanged() {
	e.hierarchyChanged()
	for uid, g := range e.books.Grants() {
		v, _ := e.books.GrantValidity(uid)
		e.grantApplied(uid, g, v.Valid)
	}
	for c := range e.waiters {
		e.dirty[c] = true
	}
}

// RegistrationValidity says whether a registration is the active one for its
// resource type.
func (e *Accounts) RegistrationValidity(name string) quota.Validity {
	return e.books.RegistrationValidity(name)
}

// BaseUnitQuantity is what one base unit of a resource type is as a
// quantity, when its active registration declares it.
func (e *Accounts) BaseUnitQuantity(resourceType string) (string, bool) {
	return e.books.BaseUnitQuantity(resourceType)
}

// RegistrationUsers counts the grants and claims that use a registration's
// resource type.
func (e *Accounts) RegistrationUsers(resourceType string) (grants, claims int) {
	return e.books.RegistrationUsers(resourceType)
}

// IsRegistered reports whether a resource type has an active registration.
func (e *Accounts) IsRegistered(resourceType string) bool { return e.books.IsRegistered(resourceType) }

// RegisteredTypes are the resource types with an active registration.
func (e *Accounts) RegisteredTypes() []string { return e.books.RegisteredTypes() }

// ValidateGrant checks a grant against the active registrations.
func (e *Accounts) ValidateGrant(g quota.Grant) quota.Validity { return e.books.ValidateGrant(g) }

// UpsertGrant adds or replaces a grant. An invalid grant contributes nothing.
func (e *Accounts) UpsertGrant(g quota.Grant) {
	v := e.books.UpsertGrant(g)
	// A grant outside its time window is as if absent: a group's grant
	// then caps nothing, as when it is deleted.
	e.grantApplied(g.UID, g, v.Valid && g.Counts())
}

// Grant is a known grant, as last upserted.
func (e *Accounts) Grant(uid string) (quota.Grant, bool) { return e.books.Grant(uid) }

// RemoveGrant forgets a grant; its contributions to limits disappear.
func (e *Accounts) RemoveGrant(uid string) {
	if g, ok := e.books.RemoveGrant(uid); ok {
		e.groupChanged(uid, g, false)
	}
}

// grantApplied follows a grant the books applied: a valid group grant joins
// the hierarchy and an invalid one leaves it; the room a valid grant gives
// is offered to its consumer's waiting claims and, as it may be a shared
// level, to every waiting claim.
func (e *Accounts) grantApplied(uid string, g quota.Grant, valid bool) {
	e.groupChanged(uid, g, valid)
	if !valid {
		return
	}
	e.roomGained(g.Consumer)
	if len(g.Allowances) > 0 {
		e.dirty[g.Consumer] = true
	}
}

// GrantValidity is the validity of a known grant.
func (e *Accounts) GrantValidity(uid string) (quota.Validity, bool) {
	return e.books.GrantValidity(uid)
}

// CheckBudget decides whether a delegated grant fits its budget
// (bookkeeping.Books.CheckBudget).
func (e *Accounts) CheckBudget(g quota.Grant) quota.BudgetResult { return e.books.CheckBudget(g) }

// HoldBudget holds what an admitted delegated grant gives until the grant is
// seen stored (UpsertGrant of the same UID and generation) or released.
func (e *Accounts) HoldBudget(g quota.Grant) { e.books.HoldBudget(g) }

// ReleaseBudgetHold forgets a hold: the grant was not stored.
func (e *Accounts) ReleaseBudgetHold(g quota.Grant) { e.books.ReleaseBudgetHold(g) }

// BudgetHolds counts holds, for tests and metrics.
func (e *Accounts) BudgetHolds() int { return e.books.BudgetHolds() }

// BudgetHold returns the hold under a grant's namespace/name.
func (e *Accounts) BudgetHold(key string) (quota.Grant, bool) { return e.books.BudgetHold(key) }

// Bucket returns the live state of a bucket; false when it does not exist
// (nothing refers to it).
func (e *Accounts) Bucket(id quota.BucketID) (quota.BucketStatus, bool) {
	e.refreshLevels()
	return e.books.Bucket(id)
}

// BucketIDs lists every existing bucket.
func (e *Accounts) BucketIDs() []quota.BucketID {
	e.refreshLevels()
	return e.books.BucketIDs()
}

// ConsumerBucketIDs lists one consumer's buckets (bookkeeping.Books.ConsumerBucketIDs).
func (e *Accounts) ConsumerBucketIDs(c quota.ConsumerID) []quota.BucketID {
	e.refreshLevels()
	return e.books.ConsumerBucketIDs(c)
}

// TakeChanged returns, and forgets, what changed since the last call:
// buckets (possibly removed), grants and registrations whose validity may
// have changed.
func (e *Accounts) TakeChanged() (buckets []quota.BucketID, grants, registrations []string) {
	e.refreshLevels()
	return e.books.TakeChanged()
}
