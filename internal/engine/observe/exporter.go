package observe

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/metricstext"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// MetricsOptions choose what the engine shows operators.
type MetricsOptions struct {
	// State exports the quota state (the seed's milo_quota_bucket_*,
	// _registration_*, _grant_*, _claim_policy_* families) on /metrics.
	State bool
	// ClaimInfo also exports milo_quota_claim_info and
	// milo_quota_claim_status_condition: one series per claim (and three per
	// claim condition), so off by default.
	ClaimInfo bool
	// History records the decision history (internal/history).
	History bool
}

// DefaultMetricsOptions are the production defaults: state and history on,
// per-claim series off.
func DefaultMetricsOptions() MetricsOptions { return MetricsOptions{State: true, History: true} }

// AddFlags registers the metrics flags.
func (o *MetricsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.State, "metrics-quota-state", o.State, "Export the quota state (buckets, registrations, grants, policies) on /metrics while this replica leads the engine.")
	fs.BoolVar(&o.ClaimInfo, "metrics-claim-info", o.ClaimInfo, "Also export milo_quota_claim_info and milo_quota_claim_status_condition, one series per ResourceClaim (off by default: a series per claim).")
	fs.BoolVar(&o.History, "decision-history", o.History, "Record every decision in its consumer's decision history (quotaplane history).")
}

// Source is where the state metrics read the leading term's objects: its
// informers' stores.
type Source struct {
	Registrations, Grants, Claims, Policies cache.Store
}

// bucketSample is what the engine last confirmed of one bucket.
type bucketSample struct {
	uid, name, namespace string
	consumer             quota.ConsumerID
	resourceType         string
	limit, allocated     int64
	available            int64
	claims, grants       int32
	generation           int64
	// verified is when the engine last found the stored bucket equal to its
	// own numbers (or wrote them): an idle bucket is verified at every
	// resync, so it is never stale.
	verified time.Time
}

// Exporter shows one replica's quota state to operators: the state metrics
// on /metrics (Handler) and the decision history. Only the leading term is
// shown: a standby's caches are not running, and two replicas exporting the
// same buckets would double every sum. Collecting never takes the engine's
// lock: buckets are kept in a copy the bucket writer updates (it reads the
// accounts anyway), and the other kinds are read from the informers' stores.
//
// State metrics are written straight in Prometheus' text format after the
// registry's metrics, not through the registry: at 100,000 buckets that is
// 700,000 series, which the registry's generic path takes 10 s to gather and
// encode on a small machine (docs/benchmarks.md).
type Exporter struct {
	mu   sync.Mutex
	opts MetricsOptions
	// source is the leading term's, nil when this replica does not lead.
	source *Source
	// since is when the term's state was rebuilt and it began deciding.
	since   time.Time
	buckets map[quota.BucketID]bucketSample
	history *HistoryWriter
	// published are other controllers' state families (the grant engine's
	// policies while it leads), by the order they were published.
	published map[int]func(*metricstext.Writer)
	nextID    int
}

// NewExporter shows what opts choose.
func NewExporter(opts MetricsOptions) *Exporter {
	return &Exporter{opts: opts, buckets: map[quota.BucketID]bucketSample{}}
}

// Publish adds write's families to /metrics, after the quota state, until
// the returned function is called: another controller's state for the term
// it leads (the grant engine's policies). A nil exporter publishes nothing.
func (x *Exporter) Publish(write func(*metricstext.Writer)) (unpublish func()) {
	if x == nil {
		return func() {}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.published == nil {
		x.published = map[int]func(*metricstext.Writer){}
	}
	id := x.nextID
	x.nextID++
	x.published[id] = write
	return func() {
		x.mu.Lock()
		delete(x.published, id)
		x.mu.Unlock()
	}
}

// publishedWriters are the published families' writers, in the order they
// were published.
func (x *Exporter) publishedWriters() []func(*metricstext.Writer) {
	if x == nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := slices.Sorted(maps.Keys(x.published))
	out := make([]func(*metricstext.Writer), 0, len(ids))
	for _, id := range ids {
		out = append(out, x.published[id])
	}
	return out
}

// SetOptions changes what is shown from now on.
func (x *Exporter) SetOptions(opts MetricsOptions) {
	x.mu.Lock()
	x.opts = opts
	x.mu.Unlock()
}

// Options are what is shown now; the zero options for a nil exporter.
func (x *Exporter) Options() MetricsOptions {
	if x == nil {
		return MetricsOptions{}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.opts
}

// Lead makes src's state the one shown, and h the history recording its
// decisions, from now until the returned function is called (the end of the
// term).
func (x *Exporter) Lead(src *Source, h *HistoryWriter) (end func()) {
	x.mu.Lock()
	x.source, x.since, x.history = src, time.Now(), h
	clear(x.buckets)
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		if x.source == src {
			x.source, x.history = nil, nil
			clear(x.buckets)
		}
		x.mu.Unlock()
	}
}

// Verified records that src's stored bucket b shows st, as of at; a changed
// limit is recorded in the decision history.
func (x *Exporter) Verified(src *Source, id quota.BucketID, b *quotav1alpha1.AllowanceBucket, st quota.BucketStatus, at time.Time) {
	opts := x.Options()
	if !opts.State && !opts.History {
		return
	}
	s := bucketSample{
		uid: string(b.UID), name: b.Name, namespace: b.Namespace,
		consumer: id.Consumer, resourceType: id.ResourceType,
		limit: st.Limit, allocated: st.Allocated, available: st.Available(),
		claims: st.Claims, grants: int32(len(st.Grants)),
		generation: b.Generation, verified: at,
	}
	x.mu.Lock()
	if x.source != src {
		x.mu.Unlock()
		return
	}
	prev, known := x.buckets[id]
	x.buckets[id] = s
	h := x.history
	x.mu.Unlock()
	if known && prev.limit != s.limit {
		h.limitChanged(id, prev, s)
	}
}

// Gone forgets a bucket of src that no longer exists.
func (x *Exporter) Gone(src *Source, id quota.BucketID) {
	x.mu.Lock()
	if x.source == src {
		delete(x.buckets, id)
	}
	x.mu.Unlock()
}

// sample is the last verified sample of a bucket.
func (x *Exporter) sample(id quota.BucketID) (bucketSample, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	s, ok := x.buckets[id]
	return s, ok
}
