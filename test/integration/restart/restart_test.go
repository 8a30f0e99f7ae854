// Package restart checks that the engine rebuilds exact buckets from the
// stored claims after a restart, and measures how long that takes.
package restart

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

func TestMain(m *testing.M) {
	testserver.Quiet()
	os.Exit(m.Run())
}

func startWithEngine(t testing.TB, dir string) *testserver.Server {
	t.Helper()
	o := quotatest.FastEngineOptions()
	o.Identity = "restart-test_0_x" // stable across restarts, as serve's is for one data directory
	s, err := testserver.Start(testserver.Options{DataDir: dir, Components: []server.Component{engine.Start(o)}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fill creates n claims of one unit spread over the fixtures, from many
// goroutines, and waits until all are decided.
func fill(t testing.TB, fixtures []*quotatest.Fixture, n int) {
	t.Helper()
	per := n / len(fixtures)
	var wg sync.WaitGroup
	errs := make(chan error, len(fixtures))
	for _, f := range fixtures {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- quotatest.CreateConcurrently(f, "c", per, 32/len(fixtures)+1)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range fixtures {
		quotatest.CountDecided(t, f, per, 5*time.Minute)
	}
}

// checkBuckets compares each fixture's bucket with the sum of its granted claims.
func checkBuckets(t testing.TB, c client.Client, fixtures []*quotatest.Fixture) {
	t.Helper()
	for _, f := range fixtures {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := c.List(context.Background(), list, client.InNamespace(f.NS)); err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, cl := range list.Items {
			if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
				sum += cl.Spec.Requests[0].Amount
			}
		}
		if sum != f.Limit {
			t.Errorf("%s: %d units granted; every bucket must be exactly full (limit %d)", f.NS, sum, f.Limit)
		}
		b := f.WaitBucket(quotatest.N(f.Limit, sum, max(0, f.Limit-sum)), "projects")
		if int(b.Status.ClaimCount) != int(sum) {
			t.Errorf("bucket %s counts %d claims, %d are granted", b.Name, b.Status.ClaimCount, sum)
		}
	}
}

func claimsFromEnv(def int) int {
	if v, err := strconv.Atoi(os.Getenv("QUOTAPLANE_RESTART_CLAIMS")); err == nil && v > 0 {
		return v
	}
	return def
}

// TestRestartRebuildsBucketsFromClaims stores 3,000 claims (10,000 at
// quotatest.FullScale; docs/testing.md "Cost of the suite, by change")
// against limits 50 short of them per bucket (so every bucket is full and
// claims wait),
// stops the server, starts it again, and checks that every bucket equals
// exactly its limit and the sum of its granted claims; it reports the time
// from start to the first new decision. The goal, under 10 s, is benchmarked
// by BenchmarkRecovery (docs/benchmarks.md §3); here that time is a timed
// assertion with a bound far above it.
func TestRestartRebuildsBucketsFromClaims(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 3,000 claims")
	}
	quotatest.Exclusive(t)
	n := claimsFromEnv(quotatest.Scale(3_000, 10_000))
	dir := t.TempDir()
	s := startWithEngine(t, dir)
	c := quotatest.NewClient(t, s.Config)
	var fixtures []*quotatest.Fixture
	for range 10 {
		f := quotatest.NewFixture(t, c)
		f.Register("projects")
		// Fewer units than claims: every bucket ends full with claims
		// waiting, so a grant lost in the restart would let a waiting claim
		// or the probe in, and one counted twice would show over the limit.
		f.Limit = int64(n/10 - 50)
		f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: f.Limit}}})
		fixtures = append(fixtures, f)
	}
	began := time.Now()
	fill(t, fixtures, n)
	t.Logf("created and decided %d claims in %s", n, time.Since(began).Round(time.Millisecond))
	checkBuckets(t, c, fixtures)
	if err := s.StopKeep(); err != nil {
		t.Fatal(err)
	}

	began = time.Now()
	s = startWithEngine(t, dir)
	defer s.Stop()
	ready := time.Since(began)
	c = quotatest.NewClient(t, s.Config)
	for _, f := range fixtures {
		f.C = c
	}
	probe := fixtures[0]
	probe.Claim("probe", quotatest.R("projects", 1))
	cond := probe.Decided("probe")
	firstDecision := time.Since(began)
	if cond.Status != metav1.ConditionFalse || cond.Reason != quotav1alpha1.ClaimReasonQuotaExceeded {
		t.Fatalf("the probe claim, with every bucket full, was not denied for quota: %+v", cond)
	}
	t.Logf("restart with %d claims: server ready after %s, first new decision after %s", n, ready.Round(time.Millisecond), firstDecision.Round(time.Millisecond))
	fmt.Printf("restart claims=%d ready=%s first-decision=%s\n", n, ready.Round(time.Millisecond), firstDecision.Round(time.Millisecond))
	// Bound 60 s (was the 10 s goal), at least 5x the CI-load median
	// (docs/benchmarks.md): a median of 4.4 s here alone (3 runs: 5.2, 4.4,
	// 3.4 s; 5.95-7.2 s on earlier days, and 10.8 s once beside other
	// packages).
	timed.Within(t, fmt.Sprintf("restart with %d claims: start → first new decision", n), firstDecision, time.Minute)
	checkBuckets(t, c, fixtures)
}

// TestEnforcementSurvivesRestart: a policy whose latest edit is invalid is
// enforced in its last valid version — also by a server (with admission)
// started again on the same data: nothing left over from before the restart
// switches enforcement off.
func TestEnforcementSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *testserver.Server {
		o := quotatest.FastEngineOptions()
		o.Identity = "restart-test_0_y"
		s, err := testserver.Start(testserver.Options{DataDir: dir, Engine: &o})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	c := quotatest.NewClient(t, s.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(5)
	valid := p.Generation
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].ResourceType = "nobody.example.com/registered"
	if err := c.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionFalse)
	if err := s.StopKeep(); err != nil {
		t.Fatal(err)
	}

	s = start()
	defer s.Stop()
	f.C = quotatest.NewClient(t, s.Config)
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}
	f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), probe, p.Name, valid)
	if err := f.C.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "after-restart", Namespace: f.NS}}); err != nil {
		t.Fatal(err)
	}
	f.WaitBucket(quotatest.N(5, 1, 4), "secrets")
}
