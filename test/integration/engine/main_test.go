// Package engine tests the quota engine inside the real server: decisions,
// buckets, conditions, contention and recovery.
package engine

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/testserver"
)

var srv *testserver.Server

// testEngineOptions keeps leader election short so tests fail over fast.
func testEngineOptions() engine.Options {
	o := engine.DefaultOptions()
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	return o
}

func TestMain(m *testing.M) {
	testserver.Quiet()
	var err error
	srv, err = testserver.Start(testserver.Options{Components: []server.Component{engine.Start(testEngineOptions())}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting quotaplane:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping quotaplane:", err)
		code = 1
	}
	os.Exit(code)
}
