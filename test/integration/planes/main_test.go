// Package planes tests the control planes of Organizations and Projects
// against the real server (docs/control-planes.md): isolation of their
// storage, Kubernetes clients through their URLs, who may enter, projects
// created through their organization's plane, quota charged across planes,
// and a deleted project's plane removed from etcd.
package planes

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
