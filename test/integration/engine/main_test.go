// Package engine tests the quota engine inside the real server: decisions,
// buckets, conditions, contention and recovery.
package engine

import (
	"fmt"
	"os"
	"testing"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	testserver.Quiet()
	var err error
	srv, err = testserver.Start(testserver.Options{Components: []server.Component{engine.Start(quotatest.FastEngineOptions())}})
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
