// Package engine runs the quota engine against a Kubernetes API server: it
// feeds registrations, grants and claims to the pure quota package, and
// writes what it decides — claim decisions, AllowanceBuckets, and the Active
// conditions of grants and registrations.
//
// Exactly one replica decides at a time: replicas elect a leader on a Lease,
// and every grant decision is first recorded in a fenced ledger (a ConfigMap
// updated with compare-and-swap, stamped with the leader's epoch), so that a
// deposed leader can never add a grant. docs/exactly-once.md explains why the
// sum of granted claims never exceeds a limit.
//
// It must never compute quota numbers itself: every number comes from
// internal/quota.
package engine
