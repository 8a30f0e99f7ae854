// Package bench measures quotaplane end to end against the real server, each
// figure next to a baseline measured in the same run. docs/benchmarks.md has
// the command, the machine and the figures.
package bench

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/testserver"
)

var srv *testserver.Server

func engineOptions() engine.Options {
	o := engine.DefaultOptions()
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	o.Identity = "bench_0_x"
	return o
}

func TestMain(m *testing.M) {
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
