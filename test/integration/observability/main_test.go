// Package observability tests what operators and tenants see of the quota
// plane against the real server: state metrics on /metrics, threshold
// conditions and Events, and the decision history.
package observability

import (
	"testing"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	// One namespace exempt besides the defaults, as --quota-exempt-namespaces
	// would make it (TestQuotaplaneRecordsAreNeverGoverned).
	o.ExemptNamespaces = append(o.ExemptNamespaces, exemptByFlag)
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}
