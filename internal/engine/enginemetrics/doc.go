// Package enginemetrics holds the quota engine's Prometheus collectors, named
// milo_quota_* as in seed 001, and registers them once with the process's
// registry. They are the only package-level values the engine's packages
// keep: a process serves one /metrics, so its collectors are process-wide by
// nature. Labels are bounded (results and reasons, never object names).
package enginemetrics
