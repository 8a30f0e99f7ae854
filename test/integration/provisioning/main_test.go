// Package provisioning tests tenants out of the box against the real server:
// an Organization gets its namespace, its owner's binding and, from
// GrantCreationPolicies, its quota; its projects are charged to it by a
// ClaimCreationPolicy; deleting it leaves nothing behind.
package provisioning

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
