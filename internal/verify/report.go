package verify

import "github.com/quotaplane/quotaplane/internal/verify/report"

// What verify reports, named here for its callers (internal/verify/report
// holds them).
type (
	Report         = report.Report
	Discrepancy    = report.Discrepancy
	Check          = report.Check
	Target         = report.Target
	FailOpen       = report.FailOpen
	PolicyStats    = report.PolicyStats
	Counts         = report.Counts
	RecheckSummary = report.RecheckSummary
)

// Exit codes and checks.
const (
	ExitClean              = report.ExitClean
	ExitDiscrepancies      = report.ExitDiscrepancies
	ExitCannotRun          = report.ExitCannotRun
	CheckUnclaimedObject   = report.CheckUnclaimedObject
	CheckUnevaluableObject = report.CheckUnevaluableObject
	CheckOrphanClaim       = report.CheckOrphanClaim
	CheckBucketMismatch    = report.CheckBucketMismatch
	CheckBucketMissing     = report.CheckBucketMissing
	CheckBucketStale       = report.CheckBucketStale
	CheckInFlightOverdue   = report.CheckInFlightOverdue
	CheckJournalUnreadable = report.CheckJournalUnreadable
	CheckPlaneConsumer     = report.CheckPlaneConsumer
	CheckConsumerMissing   = report.CheckConsumerMissing
)

// ExitCode is the exit code of a run that returned r and err.
func ExitCode(r *Report, err error) int { return report.ExitCode(r, err) }

func nsName(ns, name string) string { return report.NSName(ns, name) }
