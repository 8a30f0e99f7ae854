// Package quota is the quota arithmetic of quotaplane: consumer identity,
// dimension matching, limits from grants, allocations from claims, and the
// all-or-nothing decision on a claim.
//
// It works on values only. It must never hold a client, an informer, a clock
// or any I/O: controllers and admission feed it what they observe and write
// what it decides. Every number a user sees (a bucket's limit, allocated and
// available, a claim's outcome and message) is computed here, in one place.
package quota
