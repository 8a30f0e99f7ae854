package grantpolicy

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the grant engine. Label values are bounded: operations,
// results, condition reasons and problem kinds, never object names.
const metricsPrefix = "milo_quota_grant_policy_"

var (
	grantWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           metricsPrefix + "grant_writes_total",
		Help:           "ResourceGrant writes made for GrantCreationPolicies, by operation (create, update, delete) and result (success, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation", "result"})

	reconciles = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           metricsPrefix + "reconcile_duration_seconds",
		Help:           "Duration of one reconcile, by kind (policy, trigger) and result (success, error).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "result"})

	triggerWatches = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           metricsPrefix + "trigger_watches",
		Help:           "Trigger kinds watched now: one shared watch per kind used by at least one Ready, enabled policy.",
		StabilityLevel: metrics.ALPHA,
	})

	policiesByReason = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           metricsPrefix + "policies",
		Help:           "GrantCreationPolicies by the reason of their Ready condition.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	problems = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           metricsPrefix + "pending_grants",
		Help:           "Grants that cannot be made yet, by cause (WaitingForNamespace, NameCollision, RenderFailed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	leading = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           metricsPrefix + "leader",
		Help:           "1 while this replica leads the grant engine.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerMetrics = sync.OnceFunc(func() {
	legacyregistry.MustRegister(grantWrites, reconciles, triggerWatches, policiesByReason, problems, leading)
})

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
