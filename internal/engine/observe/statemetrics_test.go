package observe

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/metricstext"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// scrapeWorld is a leading term with buckets consumers' buckets and claims
// claims in its caches, exported as a leader exports them.
func scrapeWorld(tb testing.TB, x *Exporter, buckets, claims int) (end func()) {
	tb.Helper()
	store := func() cache.Store { return cache.NewStore(cache.MetaNamespaceKeyFunc) }
	t := &Source{Registrations: store(), Grants: store(), Claims: store(), Policies: store()}
	end = x.Lead(t, nil)
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "cpus", UID: "r1"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: "example.com/cpus", BaseUnit: "millicore", Type: quotav1alpha1.RegistrationTypeAllocation}}
	_ = t.Registrations.Add(reg)
	now := time.Now()
	for i := range buckets {
		org := fmt.Sprintf("org-%06d", i)
		id := quota.BucketID{Consumer: quota.ConsumerID{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: org}, ResourceType: "example.com/cpus"}
		b := &quotav1alpha1.AllowanceBucket{ObjectMeta: metav1.ObjectMeta{Name: quota.BucketName(id), Namespace: "organization-" + org, UID: types.UID(fmt.Sprintf("b-%d", i)), Generation: 1}}
		x.Verified(t, id, b, quota.BucketStatus{ID: id, Limit: 100, Allocated: int64(i % 100), Claims: 1, Grants: []quota.GrantContribution{{Amount: 100}}}, now)
	}
	for i := range claims {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%06d", i), Namespace: fmt.Sprintf("organization-org-%06d", i%max(buckets, 1)), UID: types.UID(fmt.Sprintf("c-%d", i))},
			Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "org"},
				ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: fmt.Sprintf("p-%d", i)}},
			Status: quotav1alpha1.ResourceClaimStatus{Conditions: []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: "QuotaAvailable"}}}}
		_ = t.Claims.Add(c)
	}
	return end
}

// scrapeOnce renders the state metrics as /metrics would: text format, the
// registry's own handler.
// With gzip, series are not counted.
func scrapeOnce(tb testing.TB, h http.Handler, gzip bool) (bytes int, series int) {
	tb.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("scrape: %d %s", rec.Code, rec.Body.String())
	}
	if gzip {
		return rec.Body.Len(), 0
	}
	body := rec.Body.String()
	return len(body), strings.Count(body, "\n") - strings.Count(body, "\n#")
}

func stateHandler(x *Exporter) http.Handler {
	return x.Handler(metrics.HandlerFor(metrics.NewKubeRegistry(), metrics.HandlerOpts{}))
}

func TestStateMetricsExportOnlyWhileLeading(t *testing.T) {
	x := NewExporter(DefaultMetricsOptions())
	h := stateHandler(x)
	end := scrapeWorld(t, x, 3, 2)
	_, series := scrapeOnce(t, h, false)
	if series == 0 {
		t.Fatal("a leader exports nothing")
	}
	// Per-claim series only when asked for: claim_info, three per claim
	// condition, two generations.
	x.SetOptions(MetricsOptions{State: true, History: true, ClaimInfo: true})
	_, withClaims := scrapeOnce(t, h, false)
	x.SetOptions(DefaultMetricsOptions())
	if want := series + 2*(1+3+2); withClaims != want {
		t.Errorf("with --metrics-claim-info, %d series; want %d", withClaims, want)
	}
	end()
	if _, series := scrapeOnce(t, h, false); series != 0 {
		t.Errorf("a replica that no longer leads exports %d series", series)
	}
}

// BenchmarkScrape times one scrape of the state metrics with 100k buckets
// and 100k claims, without and with the per-claim families
// (--metrics-claim-info), plain and gzipped (as Prometheus asks), and reports
// its size.
func BenchmarkScrape(b *testing.B) {
	for _, tc := range []struct{ claimFamilies, gzip bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		claimFamilies := tc.claimFamilies
		b.Run(fmt.Sprintf("buckets=100000/claims=100000/claim-info=%t/gzip=%t", claimFamilies, tc.gzip), func(b *testing.B) {
			x := NewExporter(MetricsOptions{State: true, History: true, ClaimInfo: claimFamilies})
			end := scrapeWorld(b, x, 100_000, 100_000)
			defer end()
			h := stateHandler(x)
			b.ResetTimer()
			var size, series int
			for range b.N {
				size, series = scrapeOnce(b, h, tc.gzip)
			}
			b.ReportMetric(float64(size)/(1<<20), "MiB/scrape")
			if !tc.gzip {
				b.ReportMetric(float64(series), "series")
			}
		})
	}
}

// TestWriteBucketsLeavesTheCallersSamples: buckets are written by
// namespace and name, and the caller's samples keep their order.
func TestWriteBucketsLeavesTheCallersSamples(t *testing.T) {
	samples := []bucketSample{
		{uid: "3", name: "b", namespace: "ns-b"},
		{uid: "1", name: "z", namespace: "ns-a"},
		{uid: "2", name: "a", namespace: "ns-b"},
	}
	before := slices.Clone(samples)
	var out strings.Builder
	w := metricstext.NewWriter(&out)
	writeBuckets(w, samples)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, line := range strings.Split(out.String(), "\n") {
		if _, rest, ok := strings.Cut(line, bucketInfoFamily.Name+`{component="quota_system",uid="`); ok {
			uid, _, _ := strings.Cut(rest, `"`)
			uids = append(uids, uid)
		}
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, uids); diff != "" {
		t.Errorf("buckets written out of namespace and name order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, samples, cmp.AllowUnexported(bucketSample{})); diff != "" {
		t.Errorf("the caller's samples were reordered (-before +after):\n%s", diff)
	}
}
