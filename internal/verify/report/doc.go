// Package report is what quotaplane verify reports: the discrepancies it
// found (each with its check, the problem and its repair), the fail-open
// objects, the policies' statistics, the counts, the exit code, and how a
// report is printed. It reads nothing and judges nothing: internal/verify
// fills it.
package report
