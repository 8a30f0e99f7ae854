package observe

import (
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/metricstext"
)

// componentLabel is on every state series, as in the seed.
const componentLabel = "quota_system"

// family is one state metric family.
type family = metricstext.Family

var (
	termStartFamily = family{Name: "milo_quota_engine_term_start_timestamp_seconds", Help: "Unix time this replica, leading the quota engine, had rebuilt its state and began deciding (only on the leader)."}

	bucketInfoFamily = family{Name: "milo_quota_bucket_info", Help: "AllowanceBucket metadata and consumer reference; always 1."}
	// The numbers of a bucket, all with the labels
	// component, namespace, name, resource_type, consumer_kind, consumer_name.
	bucketFamilies = []struct {
		family
		value func(*bucketSample) float64
	}{
		{family{Name: "milo_quota_bucket_limit", Help: "Total quota capacity from contributing grants."}, func(s *bucketSample) float64 { return float64(s.limit) }},
		{family{Name: "milo_quota_bucket_allocated", Help: "Total quota consumed by granted claims."}, func(s *bucketSample) float64 { return float64(s.allocated) }},
		{family{Name: "milo_quota_bucket_available", Help: "Available quota capacity (limit - allocated, never below 0)."}, func(s *bucketSample) float64 { return float64(s.available) }},
		{family{Name: "milo_quota_bucket_claim_count", Help: "Number of claims consuming from this bucket."}, func(s *bucketSample) float64 { return float64(s.claims) }},
		{family{Name: "milo_quota_bucket_grant_count", Help: "Number of grants contributing to this bucket."}, func(s *bucketSample) float64 { return float64(s.grants) }},
		{family{Name: "milo_quota_bucket_last_reconciliation_timestamp", Help: "Unix time the engine last verified this bucket against its own state (written or found equal); an idle bucket is verified every minute."},
			func(s *bucketSample) float64 { return float64(s.verified.UnixMilli()) / 1000 }},
		{family{Name: "milo_quota_bucket_observed_generation", Help: "Generation of the bucket the engine last verified."}, func(s *bucketSample) float64 { return float64(s.generation) }},
		{family{Name: "milo_quota_bucket_current_generation", Help: "Generation of the stored bucket."}, func(s *bucketSample) float64 { return float64(s.generation) }},
	}

	registrationInfoFamily      = family{Name: "milo_quota_registration_info", Help: "ResourceRegistration metadata; always 1."}
	registrationConditionFamily = family{Name: "milo_quota_registration_status_condition", Help: "ResourceRegistration conditions: 1 for the status the condition has, 0 for the others."}
	registrationObservedFamily  = family{Name: "milo_quota_registration_observed_generation", Help: "Generation of the registration the engine last reconciled."}
	registrationCurrentFamily   = family{Name: "milo_quota_registration_current_generation", Help: "Generation of the registration's specification."}
	thresholdFamily             = family{Name: "milo_quota_registration_threshold_percent", Help: "The percent of a limit at which the buckets of a resource type report ApproachingLimit, by level (warning, critical); the alert rules and dashboard read it."}

	grantInfoFamily      = family{Name: "milo_quota_grant_info", Help: "ResourceGrant metadata and consumer reference; always 1."}
	grantConditionFamily = family{Name: "milo_quota_grant_status_condition", Help: "ResourceGrant conditions: 1 for the status the condition has, 0 for the others."}
	grantObservedFamily  = family{Name: "milo_quota_grant_observed_generation", Help: "Generation of the grant the engine last reconciled."}
	grantCurrentFamily   = family{Name: "milo_quota_grant_current_generation", Help: "Generation of the grant's specification."}

	claimInfoFamily      = family{Name: "milo_quota_claim_info", Help: "ResourceClaim metadata, consumer and triggering resource; always 1 (only with --metrics-claim-info)."}
	claimConditionFamily = family{Name: "milo_quota_claim_status_condition", Help: "ResourceClaim conditions: 1 for the status the condition has, 0 for the others (only with --metrics-claim-info)."}
	claimObservedFamily  = family{Name: "milo_quota_claim_observed_generation", Help: "Generation of the claim the engine last decided (only with --metrics-claim-info)."}
	claimCurrentFamily   = family{Name: "milo_quota_claim_current_generation", Help: "Generation of the claim's specification (only with --metrics-claim-info)."}

	claimPolicyInfoFamily      = family{Name: "milo_quota_claim_policy_info", Help: "ClaimCreationPolicy metadata; always 1."}
	claimPolicyConditionFamily = family{Name: "milo_quota_claim_policy_status_condition", Help: "ClaimCreationPolicy conditions: 1 for the status the condition has, 0 for the others."}
	claimPolicyEnabledFamily   = family{Name: "milo_quota_claim_policy_enabled", Help: "1 when the ClaimCreationPolicy is enabled, 0 when disabled."}
	claimPolicyObservedFamily  = family{Name: "milo_quota_claim_policy_observed_generation", Help: "Generation of the policy the engine last judged."}
	claimPolicyCurrentFamily   = family{Name: "milo_quota_claim_policy_current_generation", Help: "Generation of the policy's specification."}
)

// Handler serves next's metrics (the process's registry) followed by the
// quota state this exporter shows and what other controllers published (the
// grant engine's policies), in Prometheus' text format, gzipped when the
// client accepts it. Other methods than GET (a DELETE resetting the
// registry) go to next. A nil exporter shows no quota state.
func (x *Exporter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		inner := r.Clone(r.Context())
		inner.Header.Set("Accept", "text/plain;version=0.0.4")
		inner.Header.Del("Accept-Encoding")
		rec := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		next.ServeHTTP(rec, inner)
		if rec.code != http.StatusOK {
			maps.Copy(w.Header(), rec.header)
			w.WriteHeader(rec.code)
			_, _ = w.Write(rec.body.Bytes())
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		var out io.Writer = w
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
			defer gz.Close()
			out = gz
		}
		if _, err := out.Write(rec.body.Bytes()); err != nil {
			return
		}
		e := metricstext.NewWriter(out)
		x.writeState(e)
		for _, write := range x.publishedWriters() {
			write(e)
		}
		_ = e.Flush()
	})
}

type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

// writeState writes the exported state: nothing unless this replica leads.
func (x *Exporter) writeState(e *metricstext.Writer) {
	if x == nil {
		return
	}
	// Copy under the export's own lock, format outside it.
	x.mu.Lock()
	t, since, opts := x.source, x.since, x.opts
	samples := make([]bucketSample, 0, len(x.buckets))
	for _, s := range x.buckets {
		samples = append(samples, s)
	}
	x.mu.Unlock()
	if t == nil || !opts.State {
		return
	}
	e.Header(termStartFamily)
	e.Sample(termStartFamily.Name, nil, float64(since.UnixMilli())/1000)
	writeBuckets(e, samples)
	writeRegistrations(e, t)
	writeGrants(e, t)
	writeClaimPolicies(e, t)
	if opts.ClaimInfo {
		writeClaims(e, t)
	}
}

func writeBuckets(e *metricstext.Writer, samples []bucketSample) {
	samples = slices.Clone(samples) // sorted here; the caller's order is its own
	sort.Slice(samples, func(i, j int) bool {
		if samples[i].namespace != samples[j].namespace {
			return samples[i].namespace < samples[j].namespace
		}
		return samples[i].name < samples[j].name
	})
	e.Header(bucketInfoFamily)
	var b []byte
	for i := range samples {
		s := &samples[i]
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "uid", s.uid, "name", s.name, "namespace", s.namespace,
			"consumer_api_group", s.consumer.APIGroup, "consumer_kind", s.consumer.Kind, "consumer_name", s.consumer.Name, "resource_type", s.resourceType)
		e.Sample(bucketInfoFamily.Name, b, 1)
	}
	// One label set per bucket, shared by its numbers.
	sets := make([][]byte, len(samples))
	for i := range samples {
		s := &samples[i]
		sets[i] = metricstext.LabelSet(nil, "component", componentLabel, "namespace", s.namespace, "name", s.name, "resource_type", s.resourceType,
			"consumer_kind", s.consumer.Kind, "consumer_name", s.consumer.Name)
	}
	for _, f := range bucketFamilies {
		e.Header(f.family)
		for i := range samples {
			e.Sample(f.Name, sets[i], f.value(&samples[i]))
		}
	}
}

// conditionSamples writes, for each condition, one series per possible
// status (as kube-state-metrics does), 1 for the status it has.
func conditionSamples(e *metricstext.Writer, f family, b []byte, conds []metav1.Condition, kv ...string) []byte {
	for _, c := range conds {
		for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
			v := 0.0
			if c.Status == st {
				v = 1
			}
			b = metricstext.LabelSet(b[:0], append(kv, "type", c.Type, "status", string(st))...)
			e.Sample(f.Name, b, v)
		}
	}
	return b
}

// objectsOf lists a cache's objects of type T, sorted by namespace and name.
func objectsOf[T metav1.Object](store cache.Store) []T {
	var out []T
	for _, obj := range store.List() {
		if o, ok := obj.(T); ok {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GetNamespace() != out[j].GetNamespace() {
			return out[i].GetNamespace() < out[j].GetNamespace()
		}
		return out[i].GetName() < out[j].GetName()
	})
	return out
}

func writeRegistrations(e *metricstext.Writer, t *Source) {
	regs := objectsOf[*quotav1alpha1.ResourceRegistration](t.Registrations)
	var b []byte
	e.Header(registrationInfoFamily)
	for _, r := range regs {
		factor := r.Spec.UnitConversionFactor
		if factor == 0 {
			factor = 1
		}
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "uid", string(r.UID), "name", r.Name, "description", r.Spec.Description,
			"consumer_api_group", r.Spec.ConsumerType.APIGroup, "consumer_kind", r.Spec.ConsumerType.Kind, "resource_type", string(r.Spec.ResourceType),
			"registration_type", string(r.Spec.Type), "base_unit", r.Spec.BaseUnit, "display_unit", r.Spec.DisplayUnit,
			"unit_conversion_factor", strconv.FormatInt(factor, 10))
		e.Sample(registrationInfoFamily.Name, b, 1)
	}
	e.Header(registrationConditionFamily)
	for _, r := range regs {
		b = conditionSamples(e, registrationConditionFamily, b, r.Status.Conditions, "component", componentLabel, "name", r.Name, "resource_type", string(r.Spec.ResourceType))
	}
	for _, g := range []struct {
		family
		value func(*quotav1alpha1.ResourceRegistration) int64
	}{
		{registrationObservedFamily, func(r *quotav1alpha1.ResourceRegistration) int64 { return r.Status.ObservedGeneration }},
		{registrationCurrentFamily, func(r *quotav1alpha1.ResourceRegistration) int64 { return r.Generation }},
	} {
		e.Header(g.family)
		for _, r := range regs {
			b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", r.Name, "resource_type", string(r.Spec.ResourceType))
			e.Sample(g.Name, b, float64(g.value(r)))
		}
	}
	e.Header(thresholdFamily)
	for _, r := range regs {
		th := convert.Thresholds(r)
		for _, l := range []struct {
			level string
			pct   int32
		}{{"warning", th.Warning}, {"critical", th.Critical}} {
			b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", r.Name, "resource_type", string(r.Spec.ResourceType), "level", l.level)
			e.Sample(thresholdFamily.Name, b, float64(l.pct))
		}
	}
}

func writeGenerations[T metav1.Object](e *metricstext.Writer, b []byte, objs []T, observed, current family, observedOf func(T) int64) []byte {
	for _, g := range []struct {
		family
		value func(T) int64
	}{{observed, observedOf}, {current, func(o T) int64 { return o.GetGeneration() }}} {
		e.Header(g.family)
		for _, o := range objs {
			if o.GetNamespace() == "" {
				b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", o.GetName())
			} else {
				b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", o.GetName(), "namespace", o.GetNamespace())
			}
			e.Sample(g.Name, b, float64(g.value(o)))
		}
	}
	return b
}

func writeGrants(e *metricstext.Writer, t *Source) {
	grants := objectsOf[*quotav1alpha1.ResourceGrant](t.Grants)
	var b []byte
	e.Header(grantInfoFamily)
	for _, g := range grants {
		c := g.Spec.ConsumerRef
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "uid", string(g.UID), "name", g.Name, "namespace", g.Namespace,
			"consumer_api_group", c.APIGroup, "consumer_kind", c.Kind, "consumer_name", c.Name)
		e.Sample(grantInfoFamily.Name, b, 1)
	}
	e.Header(grantConditionFamily)
	for _, g := range grants {
		b = conditionSamples(e, grantConditionFamily, b, g.Status.Conditions, "component", componentLabel, "name", g.Name, "namespace", g.Namespace)
	}
	writeGenerations(e, b, grants, grantObservedFamily, grantCurrentFamily, func(g *quotav1alpha1.ResourceGrant) int64 { return g.Status.ObservedGeneration })
}

func writeClaims(e *metricstext.Writer, t *Source) {
	claims := objectsOf[*quotav1alpha1.ResourceClaim](t.Claims)
	var b []byte
	e.Header(claimInfoFamily)
	for _, c := range claims {
		cr := c.Spec.ConsumerRef
		var ref quotav1alpha1.ResourceRef
		if c.Spec.ResourceRef != nil {
			ref = *c.Spec.ResourceRef
		}
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "uid", string(c.UID), "name", c.Name, "namespace", c.Namespace,
			"consumer_api_group", cr.APIGroup, "consumer_kind", cr.Kind, "consumer_name", cr.Name,
			"triggering_resource_api_group", ref.APIGroup, "triggering_resource_kind", ref.Kind,
			"triggering_resource_name", ref.Name, "triggering_resource_namespace", ref.Namespace)
		e.Sample(claimInfoFamily.Name, b, 1)
	}
	e.Header(claimConditionFamily)
	for _, c := range claims {
		b = conditionSamples(e, claimConditionFamily, b, c.Status.Conditions, "component", componentLabel, "name", c.Name, "namespace", c.Namespace)
	}
	writeGenerations(e, b, claims, claimObservedFamily, claimCurrentFamily, func(c *quotav1alpha1.ResourceClaim) int64 { return c.Status.ObservedGeneration })
}

func writeClaimPolicies(e *metricstext.Writer, t *Source) {
	policies := objectsOf[*quotav1alpha1.ClaimCreationPolicy](t.Policies)
	var b []byte
	e.Header(claimPolicyInfoFamily)
	for _, p := range policies {
		tr := p.Spec.Trigger.Resource
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "uid", string(p.UID), "name", p.Name, "target_api_version", tr.APIVersion,
			"target_kind", tr.Kind, "enabled", strconv.FormatBool(!p.Spec.Disabled))
		e.Sample(claimPolicyInfoFamily.Name, b, 1)
	}
	e.Header(claimPolicyConditionFamily)
	for _, p := range policies {
		b = conditionSamples(e, claimPolicyConditionFamily, b, p.Status.Conditions, "component", componentLabel, "name", p.Name)
	}
	e.Header(claimPolicyEnabledFamily)
	for _, p := range policies {
		enabled := 1.0
		if p.Spec.Disabled {
			enabled = 0
		}
		b = metricstext.LabelSet(b[:0], "component", componentLabel, "name", p.Name)
		e.Sample(claimPolicyEnabledFamily.Name, b, enabled)
	}
	writeGenerations(e, b, policies, claimPolicyObservedFamily, claimPolicyCurrentFamily, func(p *quotav1alpha1.ClaimCreationPolicy) int64 { return p.Status.ObservedGeneration })
}
