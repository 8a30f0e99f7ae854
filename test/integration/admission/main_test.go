// Package admission tests ClaimCreationPolicy enforcement at admission in the
// real server.
package admission

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/testserver"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	testserver.Quiet()
	o := engine.DefaultOptions()
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	var err error
	srv, err = testserver.Start(testserver.Options{Engine: &o})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting quotaplane:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = srv.Stop()
	os.Exit(code)
}
