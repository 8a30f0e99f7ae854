// Package engine runs the quota engine against a Kubernetes API server. A
// Runner campaigns for leadership on a Lease; each term of leadership stamps
// the fenced ledger (fence), rebuilds the quota state (cache) from a quorum
// read of every registration, grant and claim, honours what earlier leaders
// recorded, and then decides whenever something changes: it records new
// grants in the ledger before any is written, and hands the results to the
// status writers (status). While it leads, in-process admission decides
// through the same cache (admit), and settling writes admission's claims
// (settle). docs/architecture.md maps the packages; docs/exactly-once.md
// explains why the sum of granted claims never exceeds a limit.
//
// This package only assembles and runs a term: it owns the informers, the
// decide loop and the goroutines, and computes no quota number itself (every
// number comes from internal/quota). Nothing a replica owns is kept in a
// package-level variable (TestNoPackageLevelMutableState).
package engine
