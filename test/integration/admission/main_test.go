// Package admission tests ClaimCreationPolicy enforcement at admission in the
// real server.
package admission

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
