package clusters

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkMemberCreate measures creates of Secrets in a member cluster by
// 16 clients, b.N per round: (a) in a namespace the webhook configuration
// leaves alone (the member without quotaplane), (b) in the governed
// namespace, each create decided by the quota plane through quotaplane
// webhook (QUOTAPLANE_BENCH_CLIENTS sets another number of clients). It also
// reports the CPU time each process spends per create. The modes alternate for 5 rounds; it reports the medians of
// creates/s and of the p50 and p99 latency, and (b)/(a).
func BenchmarkMemberCreate(b *testing.B) {
	quotatest.Exclusive(b)
	w := newWorld(b, 1<<40, "member")
	m := w.members[0]
	ctx := context.Background()
	if err := m.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unchargedNamespace}}); err != nil {
		b.Fatal(err)
	}
	const rounds = 5
	clients := 16
	if v, err := strconv.Atoi(os.Getenv("QUOTAPLANE_BENCH_CLIENTS")); err == nil && v > 0 {
		clients = v // for the latency of one client alone
	}
	type figures struct{ rate, p50, p99, memberCPU, quotaCPU, webhookCPU float64 }
	procs := []*proc{&m.proc, &w.quota.proc, &w.webhooks[0].proc}
	run := func(ns string, round int) figures {
		cpu0 := cpuTimes(b, procs)
		lat := make([]time.Duration, b.N)
		var next sync.Mutex
		i := 0
		began := time.Now()
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					next.Lock()
					n := i
					i++
					next.Unlock()
					if n >= b.N {
						return
					}
					s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b%d-%d", round, n), Namespace: ns}}
					t0 := time.Now()
					if _, err := m.kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
						b.Errorf("create in %s: %v", ns, err)
						return
					}
					lat[n] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(began)
		cpu := cpuTimes(b, procs)
		perCreate := func(i int) float64 { return float64((cpu[i] - cpu0[i]).Microseconds()) / 1000 / float64(b.N) }
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		return figures{rate: float64(b.N) / elapsed.Seconds(), p50: ms(lat[len(lat)/2]), p99: ms(lat[len(lat)*99/100]),
			memberCPU: perCreate(0), quotaCPU: perCreate(1), webhookCPU: perCreate(2)}
	}
	b.ResetTimer()
	var base, hook []figures
	for r := range rounds {
		base = append(base, run(unchargedNamespace, r))
		hook = append(hook, run(w.f.NS, r))
	}
	b.StopTimer()
	median := func(fs []figures, get func(figures) float64) float64 {
		v := make([]float64, len(fs))
		for i, f := range fs {
			v[i] = get(f)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	rate := func(f figures) float64 { return f.rate }
	p50 := func(f figures) float64 { return f.p50 }
	p99 := func(f figures) float64 { return f.p99 }
	b.ReportMetric(median(base, rate), "base-creates/s")
	b.ReportMetric(median(hook, rate), "webhook-creates/s")
	b.ReportMetric(median(hook, rate)/median(base, rate), "ratio")
	b.ReportMetric(median(base, p50), "base-p50-ms")
	b.ReportMetric(median(hook, p50), "webhook-p50-ms")
	b.ReportMetric(median(base, p99), "base-p99-ms")
	b.ReportMetric(median(hook, p99), "webhook-p99-ms")
	b.ReportMetric(median(hook, p50)-median(base, p50), "added-p50-ms")
	b.ReportMetric(median(hook, p99)-median(base, p99), "added-p99-ms")
	for _, c := range []struct {
		name string
		get  func(figures) float64
	}{{"member", func(f figures) float64 { return f.memberCPU }}, {"quota", func(f figures) float64 { return f.quotaCPU }}, {"webhook", func(f figures) float64 { return f.webhookCPU }}} {
		b.ReportMetric(median(base, c.get), "base-"+c.name+"-cpu-ms/create")
		b.ReportMetric(median(hook, c.get), "webhook-"+c.name+"-cpu-ms/create")
	}
	b.ReportMetric(0, "ns/op")
}

// cpuTimes are the CPU times (user and system) the processes used so far.
func cpuTimes(b *testing.B, procs []*proc) []time.Duration {
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			b.Skipf("cannot read process CPU times: %v", err)
		}
		// The fields after the command name (which may hold spaces).
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100
	}
	return out
}
