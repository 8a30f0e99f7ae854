// Package verify tests quotaplane verify against the real server: a clean
// world is found clean, and every kind of damage done to a store on purpose
// is named.
package verify

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
