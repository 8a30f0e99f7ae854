package bench

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkUpdates measures what charging updates costs: b.N merge patches
// of 200 ConfigMaps by 16 clients, (a) with no policy, (b) under a policy
// that charges data.size, each patch resizing (alternately up and down by
// one), and (c) under the same policy, each patch changing only a field the
// policy does not read. The modes are interleaved, in a rotating order, for
// 5 rounds; it reports the median updates/s and p50/p99 of each, and the
// ratios (b)/(a) and (c)/(a).
func BenchmarkUpdates(b *testing.B) {
	quotatest.Exclusive(b)
	c := quotatest.NewClient(b, srv.Config)
	modes := []string{"a-none", "b-resize", "c-unread-field"}
	type run struct{ rate, p50, p99 float64 }
	runs := map[string][]run{}
	b.StopTimer()
	for round := range 5 {
		for k := range modes {
			m := modes[(round+k)%len(modes)]
			rate, p50, p99 := updatesPerSecond(b, c, m, b.N, 16)
			runs[m] = append(runs[m], run{rate, p50, p99})
			b.Logf("round %d %s: %.0f updates/s, p50 %.1f ms, p99 %.1f ms", round+1, m, rate, p50, p99)
		}
	}
	median := func(m string, f func(run) float64) float64 {
		var v []float64
		for _, r := range runs[m] {
			v = append(v, f(r))
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	for _, m := range modes {
		b.ReportMetric(median(m, func(r run) float64 { return r.rate }), m+"-updates/s")
		b.ReportMetric(median(m, func(r run) float64 { return r.p50 }), m+"-p50-ms")
		b.ReportMetric(median(m, func(r run) float64 { return r.p99 }), m+"-p99-ms")
	}
	none := median("a-none", func(r run) float64 { return r.rate })
	b.ReportMetric(median("b-resize", func(r run) float64 { return r.rate })/none, "resize/none")
	b.ReportMetric(median("c-unread-field", func(r run) float64 { return r.rate })/none, "unread/none")
}

// updatesPerSecond creates 200 ConfigMaps in a fresh namespace (charged by a
// policy unless mode is a-none), patches them n times with the given number
// of clients, and returns updates/s, p50 and p99 in milliseconds; the
// namespace is removed afterwards.
func updatesPerSecond(b *testing.B, c client.Client, mode string, n, clients int) (float64, float64, float64) {
	b.Helper()
	const objects = 200
	ctx := context.Background()
	f := quotatest.NewFixture(b, c)
	if mode != "a-none" {
		f.RegisterClaimedBy([]string{"size"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
		f.Grant("g", map[string][]quotatest.Bucket{"size": {{Amount: 10 * objects}}})
		p := f.Policy("size", "v1", "ConfigMap", "size", intstr.FromString("{{ int(trigger.data.size) }}"), func(p *quotav1alpha1.ClaimCreationPolicy) {
			p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: `has(trigger.data) && "size" in trigger.data`})
		})
		f.WaitPolicyReady(p, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.NS}, Data: map[string]string{"size": "1"}})
	}
	quotatest.ForEach(b, objects, func(i int) error {
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Namespace: f.NS},
			Data: map[string]string{"size": "1", "note": "0"}})
	})
	time.Sleep(time.Second) // let set-up writes settle
	elapsed, latencies := runClients(b, n, clients, func(i int) error {
		// Update k of an object: size 2 on odd k, 1 on even k (b:
		// alternately up and down), or only the note (c).
		obj, k := i%objects, i/objects
		body := fmt.Sprintf(`{"data":{"size":"%d"}}`, 1+(k+1)%2)
		if mode == "c-unread-field" {
			body = fmt.Sprintf(`{"data":{"note":"%d"}}`, k+1)
		}
		return c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", obj), Namespace: f.NS}},
			client.RawPatch(types.MergePatchType, []byte(body)))
	})
	time.Sleep(2 * time.Second) // the asynchronous writes: replaced claims, buckets
	removeNamespace(b, c, f.NS)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return float64(n) / elapsed.Seconds(), ms(latencies[n/2]), ms(latencies[n*99/100])
}
