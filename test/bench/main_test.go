// Package bench measures quotaplane end to end against the real server, each
// figure next to a baseline measured in the same run. docs/benchmarks.md has
// the command, the machine and the figures.
package bench

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

// crds serves quotaplane's kinds as CRDs, as serve did before it served
// them natively: the baseline of docs/benchmarks.md §15.
var crds = flag.Bool("crds", false, "serve the quota kinds as CRDs (the baseline before native storage)")

// rounds interleaves BenchmarkAdmission's runs: at each concurrency the
// three modes are measured in turn, rounds times (a, b, c, a, b, c, …), so
// that a slow minute of the shared machine falls on every mode alike.
var rounds = flag.Int("rounds", 1, "BenchmarkAdmission: rounds of the three modes at each concurrency, interleaved")

// windowProfiles, when set, writes a CPU profile of each BenchmarkAdmission
// case's measured window (the creates and the 3 s of asynchronous writes
// after them, not the set-up or the namespace's removal) into that
// directory, one file per case. Not with -test.cpuprofile.
var windowProfiles = flag.String("window-profiles", "", "BenchmarkAdmission: a directory for a CPU profile of each case's measured window")

func engineOptions() engine.Options {
	o := quotatest.FastEngineOptions()
	o.Identity = "bench_0_x" // stable across the recovery benchmark's restarts
	return o
}

// ownServes are the -test.bench values whose benchmarks start serve
// processes of their own: TestMain starts no server for them.
var ownServes = map[string]bool{"BenchmarkReplicas": true, "BenchmarkServeScale": true, "BenchmarkServeScale$": true}

func TestMain(m *testing.M) {
	// Only benchmarks use the server: `go test ./...` runs none, and starts
	// no server for nothing.
	flag.Parse()
	// BenchmarkReplicas and BenchmarkServeScale run serve processes of
	// their own.
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" || ownServes[f.Value.String()] {
		os.Exit(m.Run())
	}
	testserver.Quiet()
	var err error
	eo := engineOptions()
	srv, err = testserver.Start(testserver.Options{Engine: &eo, CRDStorage: *crds})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = srv.Stop()
	os.Exit(code)
}
