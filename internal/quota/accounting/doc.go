// Package accounting is the decision on claims: Accounts holds the claims
// and the consumer hierarchy it is fed, computes the levels each request
// draws from (its consumer, the ancestors its registration names, the groups
// that select them), and decides claims all or nothing (a claim is granted
// only when every request fits in every bucket of every level it draws
// from, and then allocated at once).
//
// The registrations, grants, buckets and delegated budgets are kept in
// Accounts' books (package bookkeeping), which it alone changes: it tells
// them which series a claim draws from and what to charge, and follows each
// change there (a group grant's validity, room a grant gives) in the claims.
// Its callers see one type, Accounts, for all of it.
//
// It works on the values of package quota only. It must never hold a
// client, an informer, a clock or any I/O, and it is not safe for
// concurrent use: the caller serializes access, feeds it what it observes
// and writes what it decides. Every number a user sees (a bucket's limit,
// allocated and available, a claim's outcome and message) is computed here,
// in package bookkeeping or in package quota, in one place.
package accounting
