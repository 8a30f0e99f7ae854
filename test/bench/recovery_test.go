package bench

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// sizes are the claim counts of the recovery and memory benchmarks;
// QUOTAPLANE_BENCH_SIZES overrides them (for example 1000,10000,100000).
func sizes() []int {
	out := []int{1000, 10000}
	if v := os.Getenv("QUOTAPLANE_BENCH_SIZES"); v != "" {
		out = nil
		for _, s := range strings.Split(v, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// filledServer starts a server in dir and stores n granted claims over 10
// consumers. The baseline of every recovery figure is the same server
// restarted without the quota engine.
func filledServer(b *testing.B, dir string, n int) []*quotatest.Fixture {
	b.Helper()
	s, err := testserver.Start(testserver.Options{DataDir: dir, Components: []server.Component{engine.Start(engineOptions())}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.StopKeep()
	c := quotatest.NewClient(b, s.Config)
	var fixtures []*quotatest.Fixture
	for range 10 {
		f := quotatest.NewFixture(b, c)
		f.Register("projects")
		f.Limit = int64(n/10 + 10)
		f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: f.Limit}}})
		fixtures = append(fixtures, f)
	}
	errs := make(chan error, len(fixtures))
	for _, f := range fixtures {
		go func() { errs <- quotatest.CreateConcurrently(f, "c", n/10, 4) }()
	}
	for range fixtures {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range fixtures {
		quotatest.WatchDecided(b, s.Config, f, n/10, 30*time.Minute)
	}
	return fixtures
}

// BenchmarkRecovery measures, for n stored claims, the time from starting
// the server to the first new decision (the engine rebuilds every bucket from
// the stored claims first), against the baseline of the same server starting
// without the engine (ready, and a first write acknowledged).
func BenchmarkRecovery(b *testing.B) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			b.StopTimer()
			dir := b.TempDir()
			fixtures := filledServer(b, dir, n)
			var withEngine, baseline time.Duration
			for range b.N {
				began := time.Now()
				s, err := testserver.Start(testserver.Options{DataDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				c := quotatest.NewClient(b, s.Config)
				f := fixtures[0]
				f.C = c
				f.Grant(fmt.Sprintf("probe-%d", time.Now().UnixNano()), map[string][]quotatest.Bucket{"projects": {{Amount: 0}}})
				baseline += time.Since(began)
				_ = s.StopKeep()

				began = time.Now()
				s, err = testserver.Start(testserver.Options{DataDir: dir, Components: []server.Component{engine.Start(engineOptions())}})
				if err != nil {
					b.Fatal(err)
				}
				f.C = quotatest.NewClient(b, s.Config)
				probe := fmt.Sprintf("probe-%d", time.Now().UnixNano())
				f.Claim(probe, quotatest.R("projects", 1))
				f.Decided(probe)
				withEngine += time.Since(began)
				_ = s.StopKeep()
			}
			b.ReportMetric(withEngine.Seconds()/float64(b.N), "s-to-first-decision")
			b.ReportMetric(baseline.Seconds()/float64(b.N), "s-baseline-start")
		})
	}
}

// BenchmarkControllerMemory measures the resident memory of a standalone
// `quotaplane controller` once it has loaded n claims, against the baseline
// of the same process with no claims.
func BenchmarkControllerMemory(b *testing.B) {
	bin := quotatest.BuildBinary(b)
	for _, n := range append([]int{0}, sizes()...) {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			b.StopTimer()
			dir := b.TempDir()
			if n > 0 {
				filledServer(b, dir, n)
			}
			s, err := testserver.Start(testserver.Options{DataDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Stop()
			var rss float64
			for range b.N {
				rss += float64(controllerRSS(b, bin, s.Kubeconfig))
			}
			b.ReportMetric(rss/float64(b.N), "MiB-RSS")
		})
	}
}

// controllerRSS starts a controller, waits until it has rebuilt the state
// (milo_quota_engine_recovery_seconds is set), and reads its RSS.
func controllerRSS(b *testing.B, bin, kubeconfig string) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--metrics-bind-address", addr,
		"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms")
	cmd.Stderr = &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, "milo_quota_engine_recovery_seconds ") && !strings.HasSuffix(line, " 0") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		b.Fatalf("the controller did not rebuild its state: %v\n%s", err, cmd.Stderr)
	}
	time.Sleep(3 * time.Second) // let start-up garbage be collected
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Skip("cannot read /proc")
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	return 0
}
