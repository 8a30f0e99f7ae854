package server_test

import (
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/testserver"
)

func TestMain(m *testing.M) {
	testserver.Quiet()
	os.Exit(m.Run())
}

// startServer starts serve in-process for t, stopped when t ends, and
// returns an administrator's client of it. Under -short, t is skipped.
func startServer(t *testing.T) kubernetes.Interface {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the server")
	}
	srv, err := testserver.Start(testserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return kubernetes.NewForConfigOrDie(srv.Config)
}
