package webhook

import (
	"net/http"
	"time"

	"k8s.io/component-base/metrics"

	"github.com/quotaplane/quotaplane/internal/webhook/credential"
)

// webhookMetrics are what the webhook shows on /metrics.
type webhookMetrics struct {
	registry   metrics.KubeRegistry
	cluster    string
	reviews    *metrics.CounterVec
	latency    *metrics.HistogramVec
	reconciles *metrics.CounterVec
	refreshes  *metrics.CounterVec
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
		refreshes: metrics.NewCounterVec(&metrics.CounterOpts{Namespace: "milo", Subsystem: "quota", Name: "webhook_credential_refreshes_total",
			Help: "Refreshes of the webhook's quota-plane token, by result: refreshed, failed (the token in use is kept; see the log for what to do).", StabilityLevel: metrics.ALPHA},
			[]string{"cluster", "result"}),
	}
	m.registry.MustRegister(m.reviews, m.latency, m.reconciles, m.refreshes)
	return m
}

func (m *webhookMetrics) reviewed(result string, d time.Duration) {
	m.reviews.WithLabelValues(m.cluster, result).Inc()
	m.latency.WithLabelValues(m.cluster, result).Observe(d.Seconds())
}

func (m *webhookMetrics) reconciled(action string) {
	m.reconciles.WithLabelValues(m.cluster, action).Inc()
}

func (m *webhookMetrics) credentialRefreshed(err error) {
	result := "refreshed"
	if err != nil {
		result = "failed"
	}
	m.refreshes.WithLabelValues(m.cluster, result).Inc()
}

// watchCredential shows how long the token in use has left: alert well
// before it reaches 0 (creates are refused once it has expired).
func (m *webhookMetrics) watchCredential(c *credential.Credential) {
	m.registry.RawMustRegister(metrics.NewGaugeFunc(&metrics.GaugeOpts{Namespace: "milo", Subsystem: "quota", Name: "webhook_credential_expiry_seconds",
		Help:        "Seconds until the webhook's quota-plane token expires (negative: expired). It is refreshed 60% through its lifetime; a value below 40% of --quota-token-lifetime means refreshes are failing.",
		ConstLabels: map[string]string{"cluster": m.cluster}, StabilityLevel: metrics.ALPHA},
		func() float64 { return time.Until(c.Current().Expires).Seconds() }))
}

func (m *webhookMetrics) handler() http.Handler {
	return metrics.HandlerFor(m.registry, metrics.HandlerOpts{})
}
