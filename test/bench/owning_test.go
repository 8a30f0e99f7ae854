package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkClaimsEnsured compares, in interleaved rounds (-rounds), b.N
// claims ensured through the claim library by 32 clients, timed until every
// one is Granted, with b.N plain ConfigMap creates by the same clients (§2's
// baseline: one write per object). It then measures the time from a grant
// raised to a denied claim's Granted decision, as an owning service sees
// it (Get), 20 times: the part of "an approved increase to a waiting
// instance starting" that quotaplane owns.
func BenchmarkClaimsEnsured(b *testing.B) {
	ctx := context.Background()
	c := quotatest.NewClient(b, srv.Config)
	quota := versioned.NewForConfigOrDie(srv.Config)
	me, err := quotaclaim.WhoAmI(ctx, srv.Config)
	if err != nil {
		b.Fatal(err)
	}
	var ensured, creates []float64
	for round := 1; round <= *rounds; round++ {
		b.Run(fmt.Sprintf("round=%d/mode=a-configmap-creates", round), func(b *testing.B) {
			b.StopTimer()
			f := quotatest.NewFixture(b, c)
			b.StartTimer()
			began := time.Now()
			parallel(b, b.N, func(i int) error {
				return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: f.NS}})
			})
			r := float64(b.N) / time.Since(began).Seconds()
			if b.N > 1 { // not the runner's first probe
				creates = append(creates, r)
			}
			b.ReportMetric(r, "creates/s")
		})
		b.Run(fmt.Sprintf("round=%d/mode=b-claims-ensured", round), func(b *testing.B) {
			b.StopTimer()
			f := quotatest.NewFixture(b, c)
			f.RegisterClaimedBy([]string{"cpu"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
			f.Grant("g", map[string][]quotatest.Bucket{"cpu": {{Amount: int64(b.N)}}})
			claimer := &quotaclaim.Claimer{Client: quota, Namespace: f.NS, Service: "bench", Identity: me}
			owners := make([]quotaclaim.Owner, b.N)
			for i := range owners {
				owners[i] = quotaclaim.Owner{APIVersion: "v1", Kind: "ConfigMap", Namespace: f.NS, Name: fmt.Sprintf("vm-%06d", i), UID: uuid.NewUUID()}
			}
			requests := []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("cpu"), Amount: 1}}
			b.StartTimer()
			began := time.Now()
			parallel(b, b.N, func(i int) error {
				_, err := claimer.Ensure(ctx, owners[i], f.Org, requests)
				return err
			})
			if granted := quotatest.WatchDecided(b, srv.Config, f, b.N, 5*time.Minute); granted != b.N {
				b.Fatalf("%d of %d claims granted", granted, b.N)
			}
			r := float64(b.N) / time.Since(began).Seconds()
			if b.N > 1 {
				ensured = append(ensured, r)
			}
			b.ReportMetric(r, "claims/s")
		})
	}
	if len(ensured) > 0 && len(creates) > 0 {
		b.Logf("claims ensured and granted %.0f/s, ConfigMap creates %.0f/s (medians of %d rounds): %.2fx", median(ensured), median(creates), len(ensured), median(ensured)/median(creates))
	}

	b.Run("increase-to-granted", func(b *testing.B) {
		f := quotatest.NewFixture(b, c)
		f.RegisterClaimedBy([]string{"cpu"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
		g := f.Grant("g", map[string][]quotatest.Bucket{"cpu": {{Amount: 1}}})
		claimer := &quotaclaim.Claimer{Client: quota, Namespace: f.NS, Service: "bench", Identity: me}
		requests := []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("cpu"), Amount: 1}}
		// A claim that holds the whole limit: each next one waits.
		holder := quotaclaim.Owner{APIVersion: "v1", Kind: "ConfigMap", Namespace: f.NS, Name: "holder", UID: uuid.NewUUID()}
		if _, err := claimer.Ensure(ctx, holder, f.Org, requests); err != nil {
			b.Fatal(err)
		}
		waitPhase(b, claimer, holder, quotaclaim.Granted)
		var took []time.Duration
		for i := range 20 {
			owner := quotaclaim.Owner{APIVersion: "v1", Kind: "ConfigMap", Namespace: f.NS, Name: fmt.Sprintf("w-%d", i), UID: uuid.NewUUID()}
			if _, err := claimer.Ensure(ctx, owner, f.Org, requests); err != nil {
				b.Fatal(err)
			}
			waitPhase(b, claimer, owner, quotaclaim.Denied)
			began := time.Now()
			f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = int64(i + 2) })
			waitPhase(b, claimer, owner, quotaclaim.Granted)
			took = append(took, time.Since(began))
		}
		slices.Sort(took)
		b.Logf("grant raised to a waiting claim Granted: median %v, p90 %v (20)", took[10], took[18])
		b.ReportMetric(float64(took[10].Microseconds())/1000, "ms-increase-to-granted-p50")
	})
}

func waitPhase(b *testing.B, c *quotaclaim.Claimer, owner quotaclaim.Owner, want quotaclaim.Phase) {
	b.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		st, found, err := c.Get(ctx, owner)
		return err == nil && found && st.Phase == want, nil
	})
	if err != nil {
		b.Fatalf("the claim of %s never became %s", owner.Name, want)
	}
}
