// Package whatif is `quotaplane what-if`: manifests read from files,
// directories or standard input, reviewed by the server as one QuotaReview
// (docs/what-if.md), and the answer printed for people (a table) or
// pipelines (JSON), with an exit status that says whether they fit.
package whatif
