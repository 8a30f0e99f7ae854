// Package compat checks, against the real server, that clients written for
// the reference implementation keep working: what they send is accepted,
// what they read is there, and a data directory written before the
// compatibility changes keeps its numbers (docs/compatibility.md).
package compat

import (
	"os"
	"testing"

	"github.com/quotaplane/quotaplane/internal/testserver"
)

func TestMain(m *testing.M) {
	testserver.Quiet()
	os.Exit(m.Run())
}
