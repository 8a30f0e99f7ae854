package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
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

// TestServeStartupFailures: every start-up failure is one line saying what
// failed and what to do, with a non-zero exit and no stack trace: a data
// directory that cannot be written, an etcd that does not answer, bad flags.
func TestServeStartupFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	port := func() string { return strconv.Itoa(freePort(t)) }
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"data dir not writable", []string{"--data-dir", filepath.Join(file, "data"), "--secure-port", port()},
			[]string{"cannot create the data directory " + filepath.Join(file, "data"), "--data-dir"}},
		{"etcd unreachable", []string{"--data-dir", filepath.Join(t.TempDir(), "data"), "--secure-port", port(), "--etcd-servers", "https://127.0.0.1:1"},
			[]string{"etcd at https://127.0.0.1:1 did not answer", "--etcd-servers"}},
		{"unknown flag", []string{"--secure-prot", "6443"}, []string{"unknown flag: --secure-prot", "'quotaplane serve --help' lists the flags"}},
		{"bad value", []string{"--secure-port", "abc"}, []string{`invalid argument "abc" for "--secure-port"`, "--help"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, tc.args...)...)
			var stderr, stdout bytes.Buffer
			cmd.Stderr, cmd.Stdout = &stderr, &stdout
			err := cmd.Run()
			if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() == 0 {
				t.Fatalf("serve %v: %v; want a non-zero exit\nstderr:\n%s", tc.args, err, stderr.String())
			}
			out := strings.TrimSpace(stderr.String())
			if lines := strings.Count(out, "\n") + 1; lines != 1 {
				t.Errorf("stderr has %d lines, want one:\n%s", lines, out)
			}
			for _, bad := range []string{"panic", "goroutine ", ".go:"} {
				if strings.Contains(out, bad) {
					t.Errorf("stderr shows %q:\n%s", bad, out)
				}
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("stderr does not say %q:\n%s", want, out)
				}
			}
		})
	}
}
