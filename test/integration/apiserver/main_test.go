// Package apiserver tests quotaplane serve through client-go against the real
// server, started in-process once for the package.
package apiserver

import (
	"fmt"
	"os"
	"testing"

	"github.com/quotaplane/quotaplane/internal/testserver"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	testserver.Quiet()
	var err error
	srv, err = testserver.Start(testserver.Options{})
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
