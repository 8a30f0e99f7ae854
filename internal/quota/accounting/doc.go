// Package accounting is the state of the quota arithmetic and the decision
// on claims: Accounts holds the registrations, grants, claims and consumer
// hierarchy it is fed, keeps every bucket's limit and allocation, decides
// claims all or nothing (a claim is granted only when every request fits
// in every bucket of every level it draws from, and then allocated at
// once), and checks delegated grants against their budgets.
//
// It works on the values of package quota only. It must never hold a
// client, an informer, a clock or any I/O, and it is not safe for
// concurrent use: the caller serializes access, feeds it what it observes
// and writes what it decides. Every number a user sees (a bucket's limit,
// allocated and available, a claim's outcome and message) is computed here
// or in package quota, in one place.
package accounting
