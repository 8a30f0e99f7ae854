// Package long holds the tests that run for minutes: claims created and
// deleted in a tight loop, and the soak test of the whole quota plane under
// traffic, policy edits and a killed leader. The README's test command gives
// them their -timeout; `go test -short` skips them.
package long

import (
	"testing"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}
