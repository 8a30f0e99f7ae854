package quotatest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Exclusive makes the heavy and the timing-sensitive tests of every package
// run one at a time: `go test ./...` runs packages in parallel, and on a
// small machine a 5-minute soak beside a restart measured against a 10 s
// goal would measure the soak. It blocks until no other such test runs (a
// lock on a file in the temporary directory, released when the test ends)
// and logs how long it waited.
func Exclusive(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "quotaplane-exclusive-tests.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Logf("waited %s for other heavy tests to finish", waited.Round(time.Second))
	}
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	})
}
