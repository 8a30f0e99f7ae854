// Package repair carries out what quotaplane verify says would repair each
// discrepancy, through the engine and the API server — never by writing
// storage: an unclaimed object is charged by asking the engine to charge the
// existing objects of its policy, an orphan claim is deleted through the API
// (the engine releases it), a stale bucket is deleted, and differences
// between the engine's memory and storage are repaired by asking for a new
// engine term, which rebuilds from storage. Every action is idempotent: a
// second run finds nothing and does nothing.
package repair
