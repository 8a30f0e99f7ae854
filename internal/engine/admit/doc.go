// Package admit is the quota engine's entry point for admission, and the
// only engine package admission plugins import. A Handle connects the
// in-process admission of quotaplane serve to the term of leadership this
// replica runs, if any: creates, updates and delegated grants are decided
// against the engine's cache, all or nothing, and a grant is durable in the
// fenced journal before the request is answered. A refusal holds nothing.
//
// It decides only in memory and records only through the fence's Committer;
// it never writes API objects (settling writes the claims once the object is
// stored). When this replica does not lead it answers ErrNotLeader.
package admit
