// Package record owns the formats the quota engine writes outside the API's
// own types: the grants admission records in its journal (PendingClaim), the
// budget holds (BudgetHold) and the ledger ConfigMap's keys (LedgerState).
// The engine writes them and quotaplane verify reads them through this one
// package, so the two can never disagree on a field.
//
// It holds values and their encoding only: no client, no lock, no clock
// beyond the timestamps the records carry.
package record
