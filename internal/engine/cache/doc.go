// Package cache is the engine's in-memory quota state, rebuilt by each term
// of leadership from a quorum read: the quota accounts (internal/quota's
// state of registrations, grants, claims and buckets), which stored claim and
// grant each UID is, the grants recorded in the ledger and not yet written,
// admission's pending grants and updates, and budget holds.
//
// One mutex guards all of it. Methods without the Locked suffix take it
// themselves; callers that must make several steps atomically (admission
// deciding a create, settling swapping an update's claims) hold Lock and use
// the Locked methods. Nothing under the lock does I/O or waits: it is taken
// on every admission and every decision, so it is held for microseconds.
// Every change that may let a waiting claim be decided signals Changed.
//
// It never writes to the API server or etcd; the numbers it holds come from
// internal/quota.
package cache
