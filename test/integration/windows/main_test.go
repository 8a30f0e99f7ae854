// Package windows tests, against the real server, grants with a time window
// (spec.validFrom, spec.expiresAt): a grant counts only inside it, its start
// and expiry are recorded on the grant before any claim is decided against
// the changed limit, and nothing held is revoked at an expiry.
package windows

import (
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

// expiryWarning is the engine's lead time for ExpiringSoon in these tests.
const expiryWarning = 5 * time.Second

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	o.ExpiryWarning = expiryWarning
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}
