package enginemetrics

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// Decisions counts claim decisions written, by result and reason.
	Decisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "milo_quota_claim_decisions_total",
		Help:           "Claim decisions written, by result (granted, denied) and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result", "reason"})
	// DecisionLatency is the time from seeing a claim to its first decision.
	DecisionLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Name:           "milo_quota_claim_decision_duration_seconds",
		Help:           "Time from the engine seeing a claim to its first decision being written, by result.",
		Buckets:        []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	// PendingClaims are the claims not granted.
	PendingClaims = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_claims_pending",
		Help:           "Claims not granted: undecided or waiting for quota.",
		StabilityLevel: metrics.ALPHA,
	})
	// Buckets are the buckets the engine maintains.
	Buckets = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_buckets",
		Help:           "AllowanceBuckets the engine maintains.",
		StabilityLevel: metrics.ALPHA,
	})
	// LedgerWrites counts fenced writes.
	LedgerWrites = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "milo_quota_ledger_writes_total",
		Help:           "Fenced writes of the decision ledger and of the admission journal (each a compare-and-swap or a conditional etcd transaction).",
		StabilityLevel: metrics.ALPHA,
	})
	// IsLeader is 1 while this replica decides.
	IsLeader = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_engine_leader",
		Help:           "1 when this replica is the deciding quota engine.",
		StabilityLevel: metrics.ALPHA,
	})
	// RecoverySeconds is how long the last rebuild took.
	RecoverySeconds = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "milo_quota_engine_recovery_seconds",
		Help:           "Time this replica took, on becoming leader, to rebuild every bucket from the stored claims.",
		StabilityLevel: metrics.ALPHA,
	})
	// UpdateReadmissions counts updates admitted again in one request.
	UpdateReadmissions = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "milo_quota_update_readmissions_total",
		Help:           "Updates whose admission ran again in the same request after a storage conflict; the earlier decision was undone first.",
		StabilityLevel: metrics.ALPHA,
	})
	// HistoryEntries counts decisions recorded in the decision history.
	HistoryEntries = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "milo_quota_history_entries_total",
		Help:           "Decisions recorded in the decision history, by event.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"event"})
	// HistoryDropped counts decisions the history could not record.
	HistoryDropped = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "milo_quota_history_dropped_total",
		Help:           "Decisions not recorded in the decision history: its queue was full, or writing failed.",
		StabilityLevel: metrics.ALPHA,
	})
	// RecordsDropped counts records of quotaplane's own that it failed to
	// write, by record: "history" (decision-history entries), "fail_open"
	// (fail-open admission records).
	RecordsDropped = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "milo_quota_records_dropped_total",
		Help:           "Records of quotaplane's own it failed to write, by record (history: decision-history entries; fail_open: fail-open admission records); each failure is also logged as an error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"record"})
)

func init() {
	legacyregistry.MustRegister(Decisions, DecisionLatency, PendingClaims, Buckets, LedgerWrites, IsLeader, RecoverySeconds,
		UpdateReadmissions, HistoryEntries, HistoryDropped, RecordsDropped)
}

// Records of quotaplane's own, the values of RecordsDropped's label.
const (
	RecordHistory  = "history"
	RecordFailOpen = "fail_open"
)

// DecisionWritten counts a claim decision written with result ("granted",
// "denied") and reason.
func DecisionWritten(granted bool, reason string) {
	result := "denied"
	if granted {
		result = "granted"
	}
	Decisions.WithLabelValues(result, reason).Inc()
}
