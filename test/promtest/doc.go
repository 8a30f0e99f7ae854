// Package promtest runs a Prometheus server (Debian's package) for tests
// that scrape quotaplane's metrics, and asks it queries, targets and
// alerts.
package promtest
