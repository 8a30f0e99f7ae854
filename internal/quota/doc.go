// Package quota holds the values of the quota arithmetic of quotaplane and
// the pure functions on them: consumer identity, dimension matching and
// bucket names, the model of registrations, grants, claims and decisions,
// saturating sums, the messages a user reads, resize growth and bucket
// placement.
//
// It holds no state between calls: the registrations, grants and claims
// known so far, and the all-or-nothing decision on a claim, are package
// accounting's, which works on these values. It must never hold a client,
// an informer, a clock or any I/O, and never import a package of the
// control plane: controllers, admission and tools import it to speak of
// the same numbers and words.
package quota
