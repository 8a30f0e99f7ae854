// Package owning tests the claim library of owning services
// (pkg/quotaclaim) and the typed clients (pkg/client) against the real
// server with its engine in-process (docs/owning-services.md).
package owning

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
