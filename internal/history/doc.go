// Package history is the decision history: what the quota engine decided
// for each consumer — claims granted, denied and released, creates refused at
// admission, grants created, changed or deleted, limits changed — with the
// bucket's numbers at that moment, so that "why was this object refused, and
// what did the bucket look like then" can be answered after the fact, after a
// restart and after the leader failed over.
//
// Each consumer's history is one ConfigMap in the engine's system namespace,
// written through the API by the leading engine (the API server is the only
// writer of API objects), holding the last Limit entries. Refusals are kept
// before routine entries: when the history is full, the oldest routine entry
// goes first. This package holds the format and the eviction rule; it does no
// I/O.
package history
