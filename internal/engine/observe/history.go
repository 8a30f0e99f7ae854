package observe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// The decision history (internal/history) is recorded off the decision
// path: decisions are seen where they are already published — the claims'
// and grants' informers, the bucket writer, and admission's refusals — put
// on a bounded queue without waiting, and written once a second per
// consumer, through the API, by the leading engine. A full queue drops
// entries and counts them rather than slow anything down.

const (
	// historyQueue bounds the entries waiting to be written.
	historyQueue = 16384
	// historyFlushPeriod is how often waiting entries are written.
	historyFlushPeriod = 2 * time.Second
	// historyWriters write consumers' histories in parallel.
	historyWriters = 4
)

type historyItem struct {
	consumer history.Consumer
	entry    history.Entry
}

// HistoryWriter writes one term's decisions into its consumers' histories.
type HistoryWriter struct {
	exporter *Exporter
	kube     kubernetes.Interface
	// namespace holds the history ConfigMaps.
	namespace string
	// live are the accounts' numbers of a consumer's buckets.
	live  func(quota.ConsumerID, []string) []quota.BucketStatus
	queue chan historyItem
	// samples are the buckets' allocated amounts from their histories, for
	// forecasts; forecastChanged is told which buckets have new ones.
	samples         usageSamples
	forecastChanged func(quota.BucketID)
	// fullLogged is when a full queue was last logged (Unix nanoseconds).
	fullLogged atomic.Int64
}

// NewHistoryWriter records into ConfigMaps in namespace, through kube, while x
// says to; live reads the accounts' numbers of buckets not verified yet.
func NewHistoryWriter(x *Exporter, kube kubernetes.Interface, namespace string, live func(quota.ConsumerID, []string) []quota.BucketStatus) *HistoryWriter {
	return &HistoryWriter{exporter: x, kube: kube, namespace: namespace, live: live, queue: make(chan historyItem, historyQueue)}
}

func (h *HistoryWriter) off() bool { return !h.exporter.Options().History }

func consumerOf(c quota.ConsumerID) history.Consumer {
	return history.Consumer{APIGroup: c.APIGroup, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

// record queues e for c's history without waiting.
func (h *HistoryWriter) record(c quota.ConsumerID, e history.Entry) {
	if h == nil || h.off() {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	select {
	case h.queue <- historyItem{consumer: consumerOf(c), entry: e}:
		enginemetrics.HistoryEntries.WithLabelValues(e.Event).Inc()
	default:
		enginemetrics.HistoryDropped.Inc()
		enginemetrics.RecordsDropped.WithLabelValues(enginemetrics.RecordHistory).Inc()
		if now := time.Now().UnixNano(); now-h.fullLogged.Load() > int64(time.Minute) {
			h.fullLogged.Store(now)
			klog.Background().Error(nil, "The decision history's queue is full; decisions are not recorded (logged at most once a minute; milo_quota_records_dropped_total counts each)", "queue", historyQueue)
		}
	}
}

// Run writes what is queued every historyFlushPeriod until ctx is done,
// and once more then.
func (h *HistoryWriter) Run(ctx context.Context) {
	h.seedSamples(ctx)
	tick := time.NewTicker(historyFlushPeriod)
	defer tick.Stop()
	pending := map[history.Consumer][]history.Entry{}
	for {
		select {
		case it := <-h.queue:
			pending[it.consumer] = append(pending[it.consumer], it.entry)
			continue
		case <-tick.C:
		case <-ctx.Done():
			// The term ended: what is queued is written by a context of its
			// own, briefly, or lost with the term (and counted).
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			h.drain(pending)
			h.flush(final, pending)
			cancel()
			return
		}
		h.flush(ctx, pending)
		clear(pending)
	}
}

func (h *HistoryWriter) drain(pending map[history.Consumer][]history.Entry) {
	for {
		select {
		case it := <-h.queue:
			pending[it.consumer] = append(pending[it.consumer], it.entry)
		default:
			return
		}
	}
}

func (h *HistoryWriter) flush(ctx context.Context, pending map[history.Consumer][]history.Entry) {
	work := make(chan history.Consumer)
	var wg sync.WaitGroup
	for range min(historyWriters, len(pending)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := h.write(ctx, c, pending[c]); err != nil {
					// Those decisions are lost: an operator must know.
					enginemetrics.HistoryDropped.Add(float64(len(pending[c])))
					enginemetrics.RecordsDropped.WithLabelValues(enginemetrics.RecordHistory).Add(float64(len(pending[c])))
					klog.FromContext(ctx).Error(err, "Could not write a decision history; its entries are lost", "consumer", c.String(),
						"configMap", klog.KRef(h.namespace, history.ConfigMapName(c)), "entries", len(pending[c]))
				}
			}
		}()
	}
	for c := range pending {
		work <- c
	}
	close(work)
	wg.Wait()
}

// write merges entries into c's history ConfigMap.
func (h *HistoryWriter) write(ctx context.Context, c history.Consumer, entries []history.Entry) error {
	ns := h.namespace
	cms := h.kube.CoreV1().ConfigMaps(ns)
	name := history.ConfigMapName(c)
	var merged []history.Entry
	err := retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
				Labels: map[string]string{history.LabelHistory: "true", history.LabelConsumerKind: quotav1alpha1.ConsumerLabelValue(c.Kind),
					history.LabelConsumerName: quotav1alpha1.ConsumerLabelValue(c.Name), quotav1alpha1.LabelManagedBy: quotav1alpha1.ManagedByQuotaplane},
				Annotations: map[string]string{history.AnnotationConsumer: c.String()}}}
			merged = history.Merge(nil, entries, history.Limit)
			if err := history.Encode(cm, merged); err != nil {
				return err
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		existing, err := history.Decode(cm)
		if err != nil {
			existing = nil // unreadable: start again rather than stop recording
		}
		updated := cm.DeepCopy()
		merged = history.Merge(existing, entries, history.Limit)
		if err := history.Encode(updated, merged); err != nil {
			return err
		}
		_, err = cms.Update(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if err == nil {
		h.learned(c, merged)
	}
	return err
}

// Watch records the decisions the claim and grant informers publish: a
// claim decided, written granted or released, a grant created, changed or
// deleted. Events of the informers' first lists are not decisions.
func (h *HistoryWriter) Watch(claims, grants cache.SharedIndexInformer) {
	_, _ = claims.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			// A claim written already granted (admission's) is a grant; one
			// created through the API is recorded when it is decided.
			if c, ok := obj.(*quotav1alpha1.ResourceClaim); ok && !initial {
				h.claimDecided(nil, c)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*quotav1alpha1.ResourceClaim)
			c, ok2 := obj.(*quotav1alpha1.ResourceClaim)
			if ok1 && ok2 {
				h.claimDecided(o, c)
			}
		},
		DeleteFunc: func(obj any) {
			if c, ok := reconcile.Unwrap(obj).(*quotav1alpha1.ResourceClaim); ok && convert.IsGranted(c) {
				h.claimEvent(c, history.ClaimReleased, nil)
			}
		},
	})
	_, _ = grants.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if g, ok := obj.(*quotav1alpha1.ResourceGrant); ok && !initial {
				h.grantEvent(g, history.GrantCreated)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*quotav1alpha1.ResourceGrant)
			g, ok2 := obj.(*quotav1alpha1.ResourceGrant)
			if ok1 && ok2 && o.Generation != g.Generation {
				h.grantEvent(g, history.GrantChanged)
			}
		},
		DeleteFunc: func(obj any) {
			if g, ok := reconcile.Unwrap(obj).(*quotav1alpha1.ResourceGrant); ok {
				h.grantEvent(g, history.GrantDeleted)
			}
		},
	})
}

// claimDecided records a claim's decision when its Granted condition
// changed to a decision.
func (h *HistoryWriter) claimDecided(old, c *quotav1alpha1.ResourceClaim) {
	if h.off() {
		return
	}
	cond := quotav1alpha1.ClaimDecision(c.Status.Conditions)
	if cond == nil {
		return
	}
	if old != nil {
		if prev := quotav1alpha1.ClaimDecision(old.Status.Conditions); prev != nil &&
			prev.Status == cond.Status && prev.Reason == cond.Reason {
			return
		}
	}
	event := history.ClaimGranted
	if cond.Status == metav1.ConditionFalse {
		event = history.ClaimDenied
	}
	h.claimEvent(c, event, cond)
}

func (h *HistoryWriter) claimEvent(c *quotav1alpha1.ResourceClaim, event string, cond *metav1.Condition) {
	if h.off() {
		return
	}
	e := history.Entry{Event: event, Policy: c.Annotations[quotav1alpha1.AnnotationPolicy],
		Object: history.ObjectRef{APIGroup: quotav1alpha1.SchemeGroupVersion.Group, Kind: "ResourceClaim", Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)}}
	if r := c.Spec.ResourceRef; r != nil {
		e.For = &history.ObjectRef{APIGroup: r.APIGroup, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: c.Annotations[quotav1alpha1.AnnotationResourceUID]}
	}
	if cond != nil {
		e.Reason = cond.Reason
		if event != history.ClaimGranted { // a grant's message says nothing its entry does not
			e.Message = cond.Message
		}
	}
	var types []string
	for _, r := range c.Spec.Requests {
		e.Requests = append(e.Requests, history.Amount{ResourceType: string(r.ResourceType), Amount: r.Amount})
		types = append(types, string(r.ResourceType))
	}
	consumer := convert.ConsumerID(c.Spec.ConsumerRef)
	e.Buckets = h.bucketNumbers(consumer, types)
	h.record(consumer, e)
}

func (h *HistoryWriter) grantEvent(g *quotav1alpha1.ResourceGrant, event string) {
	if h.off() {
		return
	}
	e := history.Entry{Event: event, Policy: g.Annotations[quotav1alpha1.GrantPolicyAnnotation],
		Object: history.ObjectRef{APIGroup: quotav1alpha1.SchemeGroupVersion.Group, Kind: "ResourceGrant", Namespace: g.Namespace, Name: g.Name, UID: string(g.UID)}}
	var types []string
	for _, a := range g.Spec.Allowances {
		var sum int64
		for _, b := range a.Buckets {
			sum += b.Amount
		}
		e.Requests = append(e.Requests, history.Amount{ResourceType: string(a.ResourceType), Amount: sum})
		types = append(types, string(a.ResourceType))
	}
	consumer := convert.ConsumerID(g.Spec.ConsumerRef)
	e.Buckets = h.bucketNumbers(consumer, types)
	h.record(consumer, e)
}

// limitChanged records a bucket whose limit changed since the engine last
// verified it.
func (h *HistoryWriter) limitChanged(id quota.BucketID, before, after bucketSample) {
	h.record(id.Consumer, history.Entry{Event: history.LimitChanged,
		Object:  history.ObjectRef{APIGroup: quotav1alpha1.SchemeGroupVersion.Group, Kind: "AllowanceBucket", Namespace: after.namespace, Name: after.name, UID: after.uid},
		Message: fmt.Sprintf("limit %d → %d", before.limit, after.limit),
		Buckets: []history.Bucket{after.numbers()}})
}

func (s bucketSample) numbers() history.Bucket {
	return history.Bucket{Name: s.name, ResourceType: s.resourceType, Limit: s.limit, Allocated: s.allocated, Available: s.available}
}

// bucketNumbers are the overall buckets of consumer for resourceTypes, as
// last verified, or — for a bucket not verified yet — as the engine has them
// now (a brief read under its lock, off the decision path).
func (h *HistoryWriter) bucketNumbers(consumer quota.ConsumerID, resourceTypes []string) []history.Bucket {
	var out []history.Bucket
	var missing []string
	for _, rt := range resourceTypes {
		if s, ok := h.exporter.sample(quota.BucketID{Consumer: consumer, ResourceType: rt}); ok {
			out = append(out, s.numbers())
		} else {
			missing = append(missing, rt)
		}
	}
	if len(missing) > 0 {
		out = append(out, h.liveNumbers(consumer, missing)...)
	}
	return out
}

// liveNumbers are the accounts' own numbers of consumer's overall buckets
// of resourceTypes.
func (h *HistoryWriter) liveNumbers(consumer quota.ConsumerID, resourceTypes []string) []history.Bucket {
	var out []history.Bucket
	for _, st := range h.live(consumer, resourceTypes) {
		out = append(out, history.Bucket{Name: quota.BucketName(st.ID), ResourceType: st.ID.ResourceType, Limit: st.Limit, Allocated: st.Allocated, Available: st.Available()})
	}
	return out
}

// Refusal records an admission refusal in the consumer's decision history,
// with its buckets' numbers, without waiting.
func (h *HistoryWriter) Refusal(r route.Refusal) {
	if h.off() {
		return
	}
	var types []string
	for _, a := range r.Requests {
		types = append(types, a.ResourceType)
	}
	// The engine's numbers at the refusal, not the last verified ones: the
	// refusal may follow the change that filled the bucket by microseconds.
	h.record(r.Consumer, history.Entry{Event: history.AdmissionRefused, Object: r.Object, Policy: r.Policy, Reason: "QuotaExceeded",
		Message: r.Message, Requests: r.Requests, Buckets: h.liveNumbers(r.Consumer, types)})
}
