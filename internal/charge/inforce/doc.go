// Package inforce is the charging component's second step: which version
// of each ClaimCreationPolicy is in force for a kind. It watches the
// policies (and the ResourceRegistrations their amounts are converted
// with), compiles each version once, and chooses the version no edit can
// open a window under (Index.InForce, enforcedVersion). It never decides
// or charges anything: internal/charge does.
package inforce
