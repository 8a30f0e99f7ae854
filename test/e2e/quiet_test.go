package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// maxLinesBeforeReady is the bound on what a newcomer reads before the line
// that matters (issue 21: at most 2).
const maxLinesBeforeReady = 2

// TestServeStartsQuietly: a fresh serve prints at most 2 lines before its
// ready line, among them none of the Kubernetes libraries' chatter, and no
// error-level line when it is stopped with SIGTERM (it used to print 3-4
// "error retrieving resource lock … connection refused"), and exits 0; -v=1
// brings the libraries' messages back.
func TestServeStartsQuietly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	tools.Require(t, tools.Kubectl) // the bad-input half sends its request with kubectl
	bin := buildBinary(t)
	quotatest.Exclusive(t)
	dataDir := filepath.Join(t.TempDir(), "data")

	// While it runs, a client sends a claim whose field has the wrong type:
	// refused with a clear answer, and nothing for the operator to read.
	badInput := func() {
		out, _ := kubectl(t, filepath.Join(dataDir, "admin.kubeconfig"), `{"apiVersion":"quota.miloapis.com/v1alpha1","kind":"ResourceClaim",
"metadata":{"name":"bad","namespace":"default"},"spec":{"consumerRef":{"kind":"Organization","name":"o"},"requests":"x"}}`, "create", "-f", "-")
		if !strings.Contains(out, "spec.requests in body must be of type array") {
			t.Errorf("a claim with requests: \"x\" was answered %q", out)
		}
	}
	before, running, stopping := serveLines(t, bin, badInput, "--data-dir", dataDir, "--secure-port", strconv.Itoa(freePort(t)))
	for _, l := range running {
		if strings.Contains(l, "SHOULD NOT HAPPEN") {
			t.Errorf("bad input logged: %s", l)
		}
	}
	var errorLines []string
	for _, l := range stopping {
		if len(l) > 1 && l[0] == 'E' && l[1] >= '0' && l[1] <= '9' || strings.HasPrefix(l, "Error:") {
			errorLines = append(errorLines, l)
		}
	}
	if len(errorLines) > 0 {
		t.Errorf("a clean shutdown printed %d error lines:\n%s", len(errorLines), strings.Join(errorLines, "\n"))
	}
	t.Logf("%d lines before the ready line:\n%s", len(before), strings.Join(before, "\n"))
	if len(before) > maxLinesBeforeReady {
		t.Errorf("serve printed %d lines before its ready line, at most %d wanted", len(before), maxLinesBeforeReady)
	}
	for _, l := range before {
		if strings.Contains(l, "grpc") || strings.Contains(l, "Skipping API") {
			t.Errorf("library chatter at the default verbosity: %s", l)
		}
	}

	verbose, _ := linesBeforeReady(t, bin, "-v=1", "--data-dir", dataDir, "--secure-port", strconv.Itoa(freePort(t)))
	t.Logf("-v=1: %d lines before the ready line", len(verbose))
	if len(verbose) <= maxLinesBeforeReady {
		t.Errorf("-v=1 printed only %d lines before ready; it should bring the libraries' messages back", len(verbose))
	}
}

// linesBeforeReady starts serve with args, returns the lines it wrote to
// either stream before its ready line on stdout, stops it with SIGTERM and
// returns what it wrote from then on; a shutdown that does not exit 0 fails
// the test.
func linesBeforeReady(t *testing.T, bin string, args ...string) (before, stopping []string) {
	before, _, stopping = serveLines(t, bin, nil, args...)
	return before, stopping
}

// serveLines is linesBeforeReady that also runs during once serve is ready
// and returns the lines written while it ran.
func serveLines(t *testing.T, bin string, during func(), args ...string) (before, whileRunning, stopping []string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	// One pipe for both streams, as a terminal shows them: the order of
	// the lines is the order they were written in.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var mu sync.Mutex
	var lines []string
	signalled := false
	readyAt := -1
	ready := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer r.Close()
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			mu.Lock()
			switch {
			case readyAt < 0 && strings.Contains(s.Text(), "quotaplane is serving"):
				readyAt = len(lines)
				close(ready)
			case readyAt < 0:
				lines = append(lines, s.Text())
			case signalled:
				stopping = append(stopping, s.Text())
			default:
				whileRunning = append(whileRunning, s.Text())
			}
			mu.Unlock()
		}
	}()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		wg.Wait()
		_ = cmd.Wait()
		t.Fatalf("serve was not ready within 2 minutes; it printed:\n%s", strings.Join(lines, "\n"))
	}
	if during != nil {
		during()
	}
	// Whatever it logs while it settles belongs to neither part.
	time.Sleep(3 * time.Second)
	mu.Lock()
	signalled = true
	mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	var exitErr error
	go func() { wg.Wait(); exitErr = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("serve did not stop within a minute of SIGTERM")
	}
	if exitErr != nil {
		t.Errorf("serve stopped with SIGTERM: %v, want exit 0", exitErr)
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), lines[:readyAt]...), append([]string(nil), whileRunning...), append([]string(nil), stopping...)
}
