// Package bookkeeping keeps the books of the quota arithmetic: which
// registration is active for each resource type, the grants and their
// validity, every bucket's limit (the sum of the grants that define it) and
// allocation (the sum of the granted requests it covers), what changed since
// it was last asked, and the delegated budgets that bound the grants an
// organization's owners write for its projects.
//
// It decides nothing about claims. Package accounting decides them, and
// tells the books which series a claim draws from and which granted
// requests to charge or release; the books only add up. It works on the
// values of package quota only. It must never hold a client, an informer, a
// clock or any I/O, and it is not safe for concurrent use: its one owner,
// accounting.Accounts, serializes access.
package bookkeeping
