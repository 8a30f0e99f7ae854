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

func engineOptions() engine.Options {
	o := quotatest.FastEngineOptions()
	o.Identity = "bench_0_x" // stable across the recovery benchmark's restarts
	return o
}

func TestMain(m *testing.M) {
	// Only benchmarks use the server: `go test ./...` runs none, and starts
	// no server for nothing.
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run())
	}
	testserver.Quiet()
	var err error
	eo := engineOptions()
	srv, err = testserver.Start(testserver.Options{Engine: &eo})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = srv.Stop()
	os.Exit(code)
}
