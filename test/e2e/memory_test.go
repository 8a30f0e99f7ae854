package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// walkthroughRSSLimitMi bounds serve's idle resident size after the
// walkthroughs (docs/operations.md, "Start-up time and memory" and
// "Memory"). The goal is 250 MiB; what the Kubernetes libraries
// hold idle keeps it above that (measured, and why, there).
const walkthroughRSSLimitMi = 320

// TestIdleMemoryAfterTheWalkthroughs: serve, after the examples'
// walkthrough (organizations, projects, grants, policies, machines,
// workloads: every command of examples/README.md), falls idle within a
// minute to a resident size below walkthroughRSSLimitMi: it returns the heap
// the load grew once allocation stops (internal/server/idlememory.go).
func TestIdleMemoryAfterTheWalkthroughs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	tools.Require(t, tools.Kubectl)
	bin := buildBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, bin, dataDir, freePort(t))
	pid := p.cmd.Process.Pid
	kc := filepath.Join(dataDir, "admin.kubeconfig")
	time.Sleep(5 * time.Second)
	empty := rssMiB(t, pid)

	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	steps, err := quotatest.ConsoleSteps(filepath.Join(root, "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 10 {
		t.Fatalf("examples/README.md has %d commands; want the walkthrough", len(steps))
	}
	began := time.Now()
	failed := 0
	for _, s := range steps {
		cmd := exec.Command("sh", "-c", s.Command)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
		if err := cmd.Run(); err != nil {
			failed++ // refusals are part of the walkthrough
		}
	}
	after := rssMiB(t, pid)
	t.Logf("the walkthrough: %d commands (%d exited non-zero, refusals included) in %s", len(steps), failed, time.Since(began).Round(time.Second))

	lowest, at := after, time.Duration(0)
	idleSince := time.Now()
	for time.Since(idleSince) < 75*time.Second {
		time.Sleep(2 * time.Second)
		if r := rssMiB(t, pid); r < lowest {
			lowest, at = r, time.Since(idleSince)
		}
		if lowest < walkthroughRSSLimitMi {
			break // fallen under the limit: the promise is kept, however soon
		}
	}
	heap := ""
	if out, err := exec.Command("kubectl", "--kubeconfig", kc, "get", "--raw", "/metrics").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "go_memstats_heap_inuse_bytes ") || strings.HasPrefix(l, "go_goroutines ") {
				heap += " " + l
			}
		}
	}
	t.Logf("serve's RSS: %d MiB empty, %d MiB right after the walkthrough, %d MiB idle (%s into idleness);%s", empty, after, lowest, at.Round(time.Second), heap)
	if lowest >= walkthroughRSSLimitMi {
		t.Errorf("idle after the walkthrough, serve's RSS is %d MiB; want under %d MiB", lowest, walkthroughRSSLimitMi)
	}
	p.stop(t)
}
