package engine

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// State metrics: every quota object as the seed's kube-state-metrics
// families (milo_quota_bucket_limit, milo_quota_registration_info, ...),
// served by the leading engine from its own state, so that no other
// component has to run. Only the leader exports them: a standby's caches are
// not running, and two replicas exporting the same buckets would double every
// sum. Collecting never takes the engine's lock: buckets are kept in a copy
// the bucket writer updates (it reads the engine anyway), and the other kinds
// are read from the informers' stores.

// MetricsOptions choose the state metrics the engine exports.
type MetricsOptions struct {
	// ClaimInfo exports milo_quota_claim_info and
	// milo_quota_claim_status_condition: one series per claim (and three per
	// claim condition), so off by default.
	ClaimInfo bool
}

// AddFlags registers the metrics flags.
func (o *MetricsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.ClaimInfo, "metrics-claim-info", o.ClaimInfo, "Export milo_quota_claim_info and milo_quota_claim_status_condition, one series per ResourceClaim (off by default: a series per claim).")
}

// Apply makes these options the process's.
func (o MetricsOptions) Apply() { claimInfo.Store(o.ClaimInfo) }

var claimInfo atomic.Bool

// componentLabel is on every state series, as in the seed.
const componentLabel = "quota_system"

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

// stateExport is the state /metrics shows: the leading term's.
type stateExport struct {
	mu   sync.Mutex
	term *term
	// since is when the term's state was rebuilt and it began deciding.
	since   time.Time
	buckets map[quota.BucketID]bucketSample
	// history records the term's decisions.
	history *historyRecorder
}

var exported = &stateExport{buckets: map[quota.BucketID]bucketSample{}}

// exportState makes t's state the one /metrics shows, and h the history
// recording its decisions, from now until the returned function is called
// (the end of the term).
func exportState(t *term, h *historyRecorder) func() {
	exported.mu.Lock()
	exported.term, exported.since, exported.history = t, time.Now(), h
	clear(exported.buckets)
	exported.mu.Unlock()
	return func() {
		exported.mu.Lock()
		if exported.term == t {
			exported.term, exported.history = nil, nil
			clear(exported.buckets)
		}
		exported.mu.Unlock()
	}
}

// bucketVerified records that the stored bucket b shows st, as of at.
func (t *term) bucketVerified(id quota.BucketID, b *quotav1alpha1.AllowanceBucket, st quota.BucketStatus, at time.Time) {
	s := bucketSample{
		uid: string(b.UID), name: b.Name, namespace: b.Namespace,
		consumer: id.Consumer, resourceType: id.ResourceType,
		limit: st.Limit, allocated: st.Allocated, available: st.Available(),
		claims: st.Claims, grants: int32(len(st.Grants)),
		generation: b.Generation, verified: at,
	}
	exported.mu.Lock()
	if exported.term != t {
		exported.mu.Unlock()
		return
	}
	prev, known := exported.buckets[id]
	exported.buckets[id] = s
	h := exported.history
	exported.mu.Unlock()
	if known && prev.limit != s.limit {
		h.limitChanged(id, prev, s)
	}
}

// bucketGone forgets a bucket that no longer exists.
func (t *term) bucketGone(id quota.BucketID) {
	exported.mu.Lock()
	if exported.term == t {
		delete(exported.buckets, id)
	}
	exported.mu.Unlock()
}

func desc(name, help string, labels ...string) *metrics.Desc {
	return metrics.NewDesc(name, help, labels, nil, metrics.ALPHA, "")
}

var (
	bucketLabelNames = []string{"component", "namespace", "name", "resource_type", "consumer_kind", "consumer_name"}

	bucketInfoDesc = desc("milo_quota_bucket_info", "AllowanceBucket metadata and consumer reference; always 1.",
		"component", "uid", "name", "namespace", "consumer_api_group", "consumer_kind", "consumer_name", "resource_type")
	bucketLimitDesc     = desc("milo_quota_bucket_limit", "Total quota capacity from contributing grants.", bucketLabelNames...)
	bucketAllocatedDesc = desc("milo_quota_bucket_allocated", "Total quota consumed by granted claims.", bucketLabelNames...)
	bucketAvailableDesc = desc("milo_quota_bucket_available", "Available quota capacity (limit - allocated, never below 0).", bucketLabelNames...)
	bucketClaimsDesc    = desc("milo_quota_bucket_claim_count", "Number of claims consuming from this bucket.", bucketLabelNames...)
	bucketGrantsDesc    = desc("milo_quota_bucket_grant_count", "Number of grants contributing to this bucket.", bucketLabelNames...)
	bucketVerifiedDesc  = desc("milo_quota_bucket_last_reconciliation_timestamp",
		"Unix time the engine last verified this bucket against its own state (written or found equal); an idle bucket is verified every minute.", bucketLabelNames...)
	bucketObservedDesc = desc("milo_quota_bucket_observed_generation", "Generation of the bucket the engine last verified.", bucketLabelNames...)
	bucketCurrentDesc  = desc("milo_quota_bucket_current_generation", "Generation of the stored bucket.", bucketLabelNames...)

	registrationInfoDesc = desc("milo_quota_registration_info", "ResourceRegistration metadata; always 1.",
		"component", "uid", "name", "description", "consumer_api_group", "consumer_kind", "resource_type", "registration_type", "base_unit", "display_unit", "unit_conversion_factor")
	registrationConditionDesc = desc("milo_quota_registration_status_condition", "ResourceRegistration conditions: 1 for the status the condition has, 0 for the others.",
		"component", "name", "resource_type", "type", "status")
	registrationObservedDesc = desc("milo_quota_registration_observed_generation", "Generation of the registration the engine last reconciled.", "component", "name", "resource_type")
	registrationCurrentDesc  = desc("milo_quota_registration_current_generation", "Generation of the registration's specification.", "component", "name", "resource_type")

	grantInfoDesc = desc("milo_quota_grant_info", "ResourceGrant metadata and consumer reference; always 1.",
		"component", "uid", "name", "namespace", "consumer_api_group", "consumer_kind", "consumer_name")
	grantConditionDesc = desc("milo_quota_grant_status_condition", "ResourceGrant conditions: 1 for the status the condition has, 0 for the others.",
		"component", "name", "namespace", "type", "status")
	grantObservedDesc = desc("milo_quota_grant_observed_generation", "Generation of the grant the engine last reconciled.", "component", "name", "namespace")
	grantCurrentDesc  = desc("milo_quota_grant_current_generation", "Generation of the grant's specification.", "component", "name", "namespace")

	claimInfoDesc = desc("milo_quota_claim_info", "ResourceClaim metadata, consumer and triggering resource; always 1 (only with --metrics-claim-info).",
		"component", "uid", "name", "namespace", "consumer_api_group", "consumer_kind", "consumer_name",
		"triggering_resource_api_group", "triggering_resource_kind", "triggering_resource_name", "triggering_resource_namespace")
	claimConditionDesc = desc("milo_quota_claim_status_condition", "ResourceClaim conditions: 1 for the status the condition has, 0 for the others (only with --metrics-claim-info).",
		"component", "name", "namespace", "type", "status")
	claimObservedDesc = desc("milo_quota_claim_observed_generation", "Generation of the claim the engine last decided (only with --metrics-claim-info).", "component", "name", "namespace")
	claimCurrentDesc  = desc("milo_quota_claim_current_generation", "Generation of the claim's specification (only with --metrics-claim-info).", "component", "name", "namespace")

	claimPolicyInfoDesc = desc("milo_quota_claim_policy_info", "ClaimCreationPolicy metadata; always 1.",
		"component", "uid", "name", "target_api_version", "target_kind", "enabled")
	claimPolicyConditionDesc = desc("milo_quota_claim_policy_status_condition", "ClaimCreationPolicy conditions: 1 for the status the condition has, 0 for the others.",
		"component", "name", "type", "status")
	claimPolicyEnabledDesc  = desc("milo_quota_claim_policy_enabled", "1 when the ClaimCreationPolicy is enabled, 0 when disabled.", "component", "name")
	claimPolicyObservedDesc = desc("milo_quota_claim_policy_observed_generation", "Generation of the policy the engine last judged.", "component", "name")
	claimPolicyCurrentDesc  = desc("milo_quota_claim_policy_current_generation", "Generation of the policy's specification.", "component", "name")

	termStartDesc = desc("milo_quota_engine_term_start_timestamp_seconds",
		"Unix time this replica, leading the quota engine, had rebuilt its state and began deciding (only on the leader).")

	stateDescs = []*metrics.Desc{
		termStartDesc,
		bucketInfoDesc, bucketLimitDesc, bucketAllocatedDesc, bucketAvailableDesc, bucketClaimsDesc, bucketGrantsDesc,
		bucketVerifiedDesc, bucketObservedDesc, bucketCurrentDesc,
		registrationInfoDesc, registrationConditionDesc, registrationObservedDesc, registrationCurrentDesc,
		grantInfoDesc, grantConditionDesc, grantObservedDesc, grantCurrentDesc,
		claimInfoDesc, claimConditionDesc, claimObservedDesc, claimCurrentDesc,
		claimPolicyInfoDesc, claimPolicyConditionDesc, claimPolicyEnabledDesc, claimPolicyObservedDesc, claimPolicyCurrentDesc,
		thresholdDesc,
	}
)

// stateCollector formats the exported state at each scrape.
type stateCollector struct {
	metrics.BaseStableCollector
}

var _ metrics.StableCollector = &stateCollector{}

func (c *stateCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	for _, d := range stateDescs {
		ch <- d
	}
}

func (c *stateCollector) CollectWithStability(ch chan<- metrics.Metric) {
	// Copy under the export's own lock, format outside it.
	exported.mu.Lock()
	t, since := exported.term, exported.since
	samples := make([]bucketSample, 0, len(exported.buckets))
	for _, s := range exported.buckets {
		samples = append(samples, s)
	}
	exported.mu.Unlock()
	if t == nil {
		return
	}
	ch <- gauge(termStartDesc, float64(since.UnixMilli())/1000)
	collectBuckets(ch, samples)
	collectRegistrations(ch, t)
	collectGrants(ch, t)
	collectClaimPolicies(ch, t)
	if claimInfo.Load() {
		collectClaims(ch, t)
	}
}

func gauge(d *metrics.Desc, v float64, labels ...string) metrics.Metric {
	return metrics.NewLazyConstMetric(d, metrics.GaugeValue, v, labels...)
}

func collectBuckets(ch chan<- metrics.Metric, samples []bucketSample) {
	for i := range samples {
		s := &samples[i]
		ch <- gauge(bucketInfoDesc, 1, componentLabel, s.uid, s.name, s.namespace, s.consumer.APIGroup, s.consumer.Kind, s.consumer.Name, s.resourceType)
		l := []string{componentLabel, s.namespace, s.name, s.resourceType, s.consumer.Kind, s.consumer.Name}
		ch <- gauge(bucketLimitDesc, float64(s.limit), l...)
		ch <- gauge(bucketAllocatedDesc, float64(s.allocated), l...)
		ch <- gauge(bucketAvailableDesc, float64(s.available), l...)
		ch <- gauge(bucketClaimsDesc, float64(s.claims), l...)
		ch <- gauge(bucketGrantsDesc, float64(s.grants), l...)
		ch <- gauge(bucketVerifiedDesc, float64(s.verified.UnixMilli())/1000, l...)
		ch <- gauge(bucketObservedDesc, float64(s.generation), l...)
		ch <- gauge(bucketCurrentDesc, float64(s.generation), l...)
	}
}

// conditionSeries emits, for each condition, one series per possible status
// (as kube-state-metrics does), 1 for the status it has.
func conditionSeries(ch chan<- metrics.Metric, d *metrics.Desc, conds []metav1.Condition, labels ...string) {
	for _, c := range conds {
		for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
			v := 0.0
			if c.Status == st {
				v = 1
			}
			ch <- gauge(d, v, append(labels, c.Type, string(st))...)
		}
	}
}

func collectRegistrations(ch chan<- metrics.Metric, t *term) {
	for _, obj := range t.regInformer.GetStore().List() {
		r, ok := obj.(*quotav1alpha1.ResourceRegistration)
		if !ok {
			continue
		}
		rt := string(r.Spec.ResourceType)
		factor := r.Spec.UnitConversionFactor
		if factor == 0 {
			factor = 1
		}
		ch <- gauge(registrationInfoDesc, 1, componentLabel, string(r.UID), r.Name, r.Spec.Description, r.Spec.ConsumerType.APIGroup, r.Spec.ConsumerType.Kind,
			rt, string(r.Spec.Type), r.Spec.BaseUnit, r.Spec.DisplayUnit, strconv.FormatInt(factor, 10))
		conditionSeries(ch, registrationConditionDesc, r.Status.Conditions, componentLabel, r.Name, rt)
		ch <- gauge(registrationObservedDesc, float64(r.Status.ObservedGeneration), componentLabel, r.Name, rt)
		ch <- gauge(registrationCurrentDesc, float64(r.Generation), componentLabel, r.Name, rt)
		collectThresholds(ch, r)
	}
}

func collectGrants(ch chan<- metrics.Metric, t *term) {
	for _, obj := range t.grantInformer.GetStore().List() {
		g, ok := obj.(*quotav1alpha1.ResourceGrant)
		if !ok {
			continue
		}
		c := g.Spec.ConsumerRef
		ch <- gauge(grantInfoDesc, 1, componentLabel, string(g.UID), g.Name, g.Namespace, c.APIGroup, c.Kind, c.Name)
		conditionSeries(ch, grantConditionDesc, g.Status.Conditions, componentLabel, g.Name, g.Namespace)
		ch <- gauge(grantObservedDesc, float64(g.Status.ObservedGeneration), componentLabel, g.Name, g.Namespace)
		ch <- gauge(grantCurrentDesc, float64(g.Generation), componentLabel, g.Name, g.Namespace)
	}
}

func collectClaims(ch chan<- metrics.Metric, t *term) {
	for _, obj := range t.claimInformer.GetStore().List() {
		c, ok := obj.(*quotav1alpha1.ResourceClaim)
		if !ok {
			continue
		}
		cr := c.Spec.ConsumerRef
		var ref quotav1alpha1.ResourceRef
		if c.Spec.ResourceRef != nil {
			ref = *c.Spec.ResourceRef
		}
		ch <- gauge(claimInfoDesc, 1, componentLabel, string(c.UID), c.Name, c.Namespace, cr.APIGroup, cr.Kind, cr.Name, ref.APIGroup, ref.Kind, ref.Name, ref.Namespace)
		conditionSeries(ch, claimConditionDesc, c.Status.Conditions, componentLabel, c.Name, c.Namespace)
		ch <- gauge(claimObservedDesc, float64(c.Status.ObservedGeneration), componentLabel, c.Name, c.Namespace)
		ch <- gauge(claimCurrentDesc, float64(c.Generation), componentLabel, c.Name, c.Namespace)
	}
}

func collectClaimPolicies(ch chan<- metrics.Metric, t *term) {
	for _, obj := range t.policyInformer.GetStore().List() {
		p, ok := obj.(*quotav1alpha1.ClaimCreationPolicy)
		if !ok {
			continue
		}
		enabled := 1.0
		if p.Spec.Disabled {
			enabled = 0
		}
		tr := p.Spec.Trigger.Resource
		ch <- gauge(claimPolicyInfoDesc, 1, componentLabel, string(p.UID), p.Name, tr.APIVersion, tr.Kind, strconv.FormatBool(!p.Spec.Disabled))
		conditionSeries(ch, claimPolicyConditionDesc, p.Status.Conditions, componentLabel, p.Name)
		ch <- gauge(claimPolicyEnabledDesc, enabled, componentLabel, p.Name)
		ch <- gauge(claimPolicyObservedDesc, float64(p.Status.ObservedGeneration), componentLabel, p.Name)
		ch <- gauge(claimPolicyCurrentDesc, float64(p.Generation), componentLabel, p.Name)
	}
}
