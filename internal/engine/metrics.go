package engine

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the quota engine, named milo_quota_* as in seed 001. Labels are
// bounded: results and reasons only, never object names.
var (
	decisionsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "milo_quota_claim_decisions_total",
		Help:           "Claim decisions written, by result (granted, denied) and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result", "reason"})
	decisionLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "milo_quota_claim_decision_duration_seconds",
		Help:           "Time from the engine seeing a claim to its first decision being written, by result.",
		Buckets:        []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	pendingClaims = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_claims_pending",
		Help:           "Claims not granted: undecided or waiting for quota.",
		StabilityLevel: metrics.ALPHA,
	})
	bucketsGauge = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_buckets",
		Help:           "AllowanceBuckets the engine maintains.",
		StabilityLevel: metrics.ALPHA,
	})
	ledgerWrites = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "milo_quota_ledger_writes_total",
		Help:           "Fenced writes of the decision ledger and of the admission journal (each a compare-and-swap or a conditional etcd transaction).",
		StabilityLevel: metrics.ALPHA,
	})
	isLeader = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_engine_leader",
		Help:           "1 when this replica is the deciding quota engine.",
		StabilityLevel: metrics.ALPHA,
	})
	recoverySeconds = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_engine_recovery_seconds",
		Help:           "Time this replica took, on becoming leader, to rebuild every bucket from the stored claims.",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(decisionsTotal, decisionLatency, pendingClaims, bucketsGauge, ledgerWrites, isLeader, recoverySeconds)
	})
}
