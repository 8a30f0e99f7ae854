// Package compat checks, against the real server, that clients written for
// the reference implementation keep working: what they send is accepted,
// invalid policies are refused at create, what they read is there in the
// reference's shape, refusals start with the reference's words, and a data
// directory written before these changes keeps its numbers
// (docs/compatibility.md).
package compat

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
