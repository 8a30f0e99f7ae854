package e2e

import (
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeOnABusyPort: a port already taken (kind, k3s or minikube on
// 6443) ends serve at once with one line naming the port and
// --secure-port, a non-zero exit, and no stack trace. It used to panic.
func TestServeOnABusyPort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--data-dir", filepath.Join(t.TempDir(), "data"), "--secure-port", strconv.Itoa(port), "--bind-address", "127.0.0.1")
	var stderr, stdout bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stdout
	err = cmd.Run()
	exit, ok := err.(*exec.ExitError)
	if !ok || exit.ExitCode() == 0 {
		t.Fatalf("serve on a busy port: %v; want a non-zero exit\nstderr:\n%s", err, stderr.String())
	}
	out := strings.TrimSpace(stderr.String())
	for _, bad := range []string{"panic", "goroutine ", ".go:"} {
		if strings.Contains(out, bad) {
			t.Errorf("stderr shows %q:\n%s", bad, out)
		}
	}
	for _, want := range []string{strconv.Itoa(port), "already in use", "--secure-port"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr does not say %q:\n%s", want, out)
		}
	}
	if lines := strings.Count(out, "\n") + 1; lines > 2 {
		t.Errorf("stderr has %d lines, want the error alone:\n%s", lines, out)
	}
}
