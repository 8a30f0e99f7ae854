// Package grants tests the grant engine (internal/grantpolicy) against the
// real server: GrantCreationPolicies turn trigger objects into ResourceGrants
// that the quota engine makes Active, follow the objects as they change, and
// take the grants back when an object, its match or the policy goes.
package grants

import (
	"testing"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

// systemNamespace holds the grants of cluster-scoped triggers whose
// template names no namespace.
var systemNamespace = engine.DefaultOptions().SystemNamespace

// TestMain starts the server as serve runs it: the quota engine and the
// grant engine (server.QuotaComponents), with short leader election.
func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}
