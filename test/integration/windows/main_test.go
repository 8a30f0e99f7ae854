// Package windows tests, against the real server, grants with a time window
// (spec.validFrom, spec.expiresAt): a grant counts only inside it, its start
// and expiry are recorded on the grant before any claim is decided against
// the changed limit, and nothing held is revoked at an expiry.
package windows

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
