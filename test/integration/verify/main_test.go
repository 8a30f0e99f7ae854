// Package verify tests quotaplane verify against the real server: a clean
// world is found clean, and every kind of damage done to a store on purpose
// is named.
package verify

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
