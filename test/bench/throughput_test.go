package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

const clients = 32

// parallel runs n calls of fn from clients goroutines.
func parallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// BenchmarkClaimsDecided measures claims decided per second through the API:
// b.N claims created by 32 clients, timed until every one has a decision.
// The baseline is b.N plain ConfigMap creates by the same clients on the same
// server: what the API server and etcd sustain for one write per object.
func BenchmarkClaimsDecided(b *testing.B) {
	c := quotatest.NewClient(b, srv.Config)
	for _, consumers := range []int{1, 100} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			b.StopTimer()
			var fixtures []*quotatest.Fixture
			for range consumers {
				f := quotatest.NewFixture(b, c)
				f.Register("projects")
				f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: int64(b.N)}}})
				fixtures = append(fixtures, f)
			}
			b.StartTimer()
			began := time.Now()
			parallel(b, b.N, func(i int) error {
				f := fixtures[i%consumers]
				return c.Create(context.Background(), f.ClaimObject(fmt.Sprintf("c-%06d", i), quotatest.R("projects", 1)))
			})
			created := time.Since(began)
			for i, f := range fixtures {
				want := b.N / consumers
				if i < b.N%consumers {
					want++
				}
				quotatest.WatchDecided(b, srv.Config, f, want, 10*time.Minute)
			}
			b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "claims/s")
			// Where the time goes: the creates alone (admission and storage),
			// and how long the last decisions came after the last create.
			b.ReportMetric(float64(b.N)/created.Seconds(), "created/s")
			b.ReportMetric(float64((time.Since(began) - created).Milliseconds()), "decided-after-ms")
		})
	}
	b.Run("baseline=configmap-creates", func(b *testing.B) {
		b.StopTimer()
		f := quotatest.NewFixture(b, c)
		b.StartTimer()
		began := time.Now()
		parallel(b, b.N, func(i int) error {
			return c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: f.NS}})
		})
		b.ReportMetric(float64(b.N)/time.Since(began).Seconds(), "creates/s")
	})
}
