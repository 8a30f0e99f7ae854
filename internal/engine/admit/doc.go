// Package admit is the quota engine's local decisions for admission: while
// this replica leads, its Term decides creates, updates, delegated grants
// and reviews against the engine's cache, all or nothing, and a grant is
// durable in the fenced journal before the decision returns. A refusal
// holds nothing. It implements route.Decider: internal/engine/route brings
// it the questions, from this replica's own requests or, on the leader,
// from the followers'.
//
// It decides only in memory and records only through the fence's Committer;
// it never writes API objects (settling writes the claims once the object is
// stored).
package admit
