package observe

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// usageSamples are the allocated amounts of each overall bucket, by bucket
// name, read from its consumer's decision history: what the bucket writer
// forecasts from (docs/self-service.md "See it coming").
type usageSamples struct {
	mu     sync.Mutex
	byName map[string][]quota.UsageSample
}

// learn replaces the samples of every bucket in c's history with those of
// entries (its whole merged history), and returns their IDs.
func (s *usageSamples) learn(c history.Consumer, entries []history.Entry) []quota.BucketID {
	fresh := map[string][]quota.UsageSample{}
	ids := map[string]quota.BucketID{}
	for _, e := range entries {
		for _, b := range e.Buckets {
			fresh[b.Name] = append(fresh[b.Name], quota.UsageSample{At: e.Time, Allocated: b.Allocated, Limit: b.Limit})
			ids[b.Name] = quota.BucketID{Consumer: quota.ConsumerID{APIGroup: c.APIGroup, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name},
				ResourceType: b.ResourceType}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[string][]quota.UsageSample{}
	}
	out := make([]quota.BucketID, 0, len(fresh))
	for name, samples := range fresh {
		s.byName[name] = samples
		out = append(out, ids[name])
	}
	return out
}

func (s *usageSamples) of(name string) []quota.UsageSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byName[name]
}

// Forecast is the trend and time-to-exhaustion of the overall bucket id,
// whose numbers now are st, from its consumer's decision history. Buckets
// narrowed by dimensions have no history of their own and no forecast.
func (h *HistoryWriter) Forecast(id quota.BucketID, st quota.BucketStatus, now time.Time) (trend, fullIn string, fullAt *metav1.Time) {
	if h == nil || id.Dims != "" {
		return "", "", nil
	}
	f := quota.EstimateExhaustion(h.samples.of(quota.BucketName(id)), now, st.Allocated, st.Limit)
	if !f.FullAt.IsZero() {
		// Whole minutes: the estimate is not rewritten for every second.
		t := metav1.NewTime(f.FullAt.Truncate(time.Minute))
		fullAt = &t
	}
	return f.Trend(), f.FullIn(now), fullAt
}

// OnForecast is told the buckets whose history changed, to write their
// forecast again.
func (h *HistoryWriter) OnForecast(f func(quota.BucketID)) { h.forecastChanged = f }

// seedSamples reads every consumer's history once, when the term begins.
func (h *HistoryWriter) seedSamples(ctx context.Context) {
	cms, err := h.kube.CoreV1().ConfigMaps(h.namespace).List(ctx, metav1.ListOptions{LabelSelector: history.LabelHistory + "=true"})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read the decision histories for forecasts", "err", err)
		return
	}
	for i := range cms.Items {
		entries, err := history.Decode(&cms.Items[i])
		if err != nil {
			continue
		}
		h.learned(history.ConsumerOf(&cms.Items[i]), entries)
	}
}

func (h *HistoryWriter) learned(c history.Consumer, entries []history.Entry) {
	ids := h.samples.learn(c, entries)
	if f := h.forecastChanged; f != nil {
		for _, id := range ids {
			f(id)
		}
	}
}
