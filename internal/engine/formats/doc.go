// Package formats owns the formats and names of what quotaplane keeps beside
// the API's own types: the grants admission records in its journal
// (PendingClaim), the budget holds (BudgetHold), the fail-open records, the
// etcd keys they live under, the ledger ConfigMap's keys (LedgerState), and
// the file in serve's data directory naming its etcd. The writers (the
// engine, admission, serve) and the reader (quotaplane verify) all go
// through this one package, so they can never disagree on a field.
//
// It holds values and their encoding only: no client, no lock, no I/O beyond
// that one file.
package formats
