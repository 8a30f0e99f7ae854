package webhook

import (
	"net/http"
	"time"

	"k8s.io/component-base/metrics"
)

// webhookMetrics are what the webhook shows on /metrics.
type webhookMetrics struct {
	registry   metrics.KubeRegistry
	cluster    string
	reviews    *metrics.CounterVec
	latency    *metrics.HistogramVec
	reconciles *metrics.CounterVec
}

func newMetrics(cluster string) *webhookMetrics {
	m := &webhookMetrics{registry: metrics.NewKubeRegistry(), cluster: cluster,
		reviews: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "milo", Subsystem: "quota", Name: "webhook_reviews_total",
			Help: "Admission reviews of a member cluster answered by quotaplane webhook, by result: not_governed, allowed, denied, unavailable (refused: the quota plane could not decide), fail_open, error.", StabilityLevel: metrics.ALPHA},
			[]string{"cluster", "result"}),
		latency: metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: "milo", Subsystem: "quota", Name: "webhook_review_duration_seconds",
			Help: "Time quotaplane webhook took to answer a review, the quota plane's decision included.", Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 10}, StabilityLevel: metrics.ALPHA},
			[]string{"cluster", "result"}),
		reconciles: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "milo", Subsystem: "quota", Name: "webhook_reconciled_total",
			Help: "What the member cluster reconcile did: released (a claim whose object is not in the cluster), charged (an object created while the webhook was bypassed or down), over_quota (such an object that cannot be charged).", StabilityLevel: metrics.ALPHA},
			[]string{"cluster", "action"}),
	}
	m.registry.MustRegister(m.reviews, m.latency, m.reconciles)
	return m
}

func (m *webhookMetrics) reviewed(result string, d time.Duration) {
	m.reviews.WithLabelValues(m.cluster, result).Inc()
	m.latency.WithLabelValues(m.cluster, result).Observe(d.Seconds())
}

func (m *webhookMetrics) reconciled(action string) {
	m.reconciles.WithLabelValues(m.cluster, action).Inc()
}

func (m *webhookMetrics) handler() http.Handler {
	return metrics.HandlerFor(m.registry, metrics.HandlerOpts{})
}
