// Package observe shows the leading term's quota state to operators without
// touching the decision path: the state metrics (the seed's milo_quota_*
// kube-state-metrics families) written on /metrics by an Exporter, and the
// decision history written by a HistoryWriter off a bounded queue and written,
// through the API, once every few seconds per consumer.
//
// Everything it shows is read from informer stores, from the bucket writer's
// last verified numbers, or from a brief read of the engine cache; it never
// decides, and a full history queue drops entries (counted) rather than slow
// a request down. All its state belongs to an Exporter value.
package observe
