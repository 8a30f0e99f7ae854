package deploy_test

import (
	"os"
	"testing"

	"github.com/quotaplane/quotaplane/internal/testserver"
)

func TestMain(m *testing.M) {
	testserver.Quiet()
	os.Exit(m.Run())
}
