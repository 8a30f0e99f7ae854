// Package admission tests ClaimCreationPolicy enforcement at admission in the
// real server.
package admission

import (
	"fmt"
	"os"
	"testing"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	testserver.Quiet()
	o := quotatest.FastEngineOptions()
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
