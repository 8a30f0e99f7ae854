package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/test/promtest"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// BenchmarkObservabilityCost measures what the state metrics and the decision
// history cost admission: creates/s of Secrets charged by a
// ClaimCreationPolicy (16 clients, b.N creates per run) with everything on,
// with the state metrics off, and with the history off, while Prometheus
// scrapes the server every 5 s and 1,000 other buckets exist. The three
// modes are interleaved, in a rotating order, for 5 rounds; it reports the
// median creates/s of each and the ratios on/off.
func BenchmarkObservabilityCost(b *testing.B) {
	bin := tools.Require(b, tools.Prometheus)
	quotatest.Exclusive(b)
	c := quotatest.NewClient(b, srv.Config)
	prom := promtest.Start(b, bin, b.TempDir(), 5*time.Second, "", promtest.Target{Name: "serve", Config: srv.Config})
	prom.WaitTargetsUp(b, 1)

	// 1,000 buckets for every scrape to write: one per zone.
	others := quotatest.NewFixture(b, c)
	others.Register("things")
	quotatest.ForEach(b, 1000, func(i int) error {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g%d", i), Namespace: others.NS},
			Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: others.Org,
				Allowances: []quotav1alpha1.Allowance{{ResourceType: others.RT("things"),
					Buckets: []quotav1alpha1.GrantBucket{{Amount: 10, Dimensions: []quotav1alpha1.Dimension{{Key: "zone", Value: fmt.Sprintf("z%d", i)}}}}}}}}
		return c.Create(context.Background(), g)
	})
	time.Sleep(10 * time.Second) // buckets written, two scrapes of them

	modes := []struct {
		name string
		opts observe.MetricsOptions
	}{
		{"all-on", observe.DefaultMetricsOptions()},
		{"state-off", observe.MetricsOptions{State: false, History: true}},
		{"history-off", observe.MetricsOptions{State: true, History: false}},
	}
	defer srv.Metrics.SetOptions(observe.DefaultMetricsOptions())
	rates := map[string][]float64{}
	b.StopTimer()
	for round := range 5 {
		for k := range modes {
			m := modes[(round+k)%len(modes)]
			srv.Metrics.SetOptions(m.opts)
			rate := createsPerSecond(b, c, b.N, 16)
			rates[m.name] = append(rates[m.name], rate)
			b.Logf("round %d %s: %.0f creates/s", round+1, m.name, rate)
		}
	}
	median := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	for _, m := range modes {
		b.ReportMetric(median(rates[m.name]), m.name+"-creates/s")
	}
	b.ReportMetric(median(rates["all-on"])/median(rates["state-off"]), "state-on/off")
	b.ReportMetric(median(rates["all-on"])/median(rates["history-off"]), "history-on/off")
}

// createsPerSecond creates n Secrets charged by a fresh ClaimCreationPolicy
// with the given number of clients, and returns creates/s; the namespace is
// removed afterwards, so that every run starts from the same state.
func createsPerSecond(b *testing.B, c client.Client, n, clients int) float64 {
	b.Helper()
	f := quotatest.NewFixture(b, c)
	f.SecretsPolicy(int64(n + 10))
	time.Sleep(time.Second) // let set-up writes settle
	elapsed, _ := runClients(b, n, clients, func(i int) error {
		return c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%06d", i), Namespace: f.NS}, StringData: map[string]string{"k": "v"}})
	})
	time.Sleep(2 * time.Second) // the asynchronous writes: claims, buckets, history
	removeNamespace(b, c, f.NS)
	return float64(n) / elapsed.Seconds()
}

// runClients calls do for 0..n-1 from the given number of clients, fails
// the benchmark if any call failed, and returns the time all took and each
// call's latency, sorted.
func runClients(b *testing.B, n, clients int, do func(i int) error) (time.Duration, []time.Duration) {
	b.Helper()
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	latencies := make([]time.Duration, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	began := time.Now()
	for range clients {
		wg.Go(func() {
			for i := range next {
				start := time.Now()
				err := do(i)
				latencies[i] = time.Since(start)
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	if failed != nil {
		b.Fatal(failed)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return elapsed, latencies
}
