// Package metricstext writes Prometheus' text exposition format directly:
// for state metrics with hundreds of thousands of series, which the metrics
// registry's generic path (a metric object per series, gathered, sorted and
// encoded) takes ten times longer to produce. Callers write each family's
// header once, then its series; label sets can be built once and reused
// across families.
package metricstext
