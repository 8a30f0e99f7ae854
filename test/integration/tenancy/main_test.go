// Package tenancy tests Organizations and Projects against the real server:
// what an organization is given (its namespace, its owner's bindings), what
// deleting it removes, what admission refuses, and that an owner of one
// organization cannot act in another (docs/tenancy.md).
package tenancy

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
