// Package hierarchy tells the engine where each consumer sits: which kinds
// have parents (ParentRelation, --consumer-parent), and, from metadata
// watches of those kinds, each consumer's parent and labels, which the
// accounts turn into the levels a claim draws from and the groups that cover
// it (docs/conditions.md "Levels").
//
// It only observes: it never writes, and never computes a level itself.
package hierarchy
