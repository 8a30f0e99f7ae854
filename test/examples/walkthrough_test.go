// Package examples runs the walkthrough in examples/README.md against a fresh
// server, command by command, and checks each command's output against the
// output the walkthrough shows.
package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// readWalkthrough returns the steps of every ```console block, in order.
func readWalkthrough(t *testing.T, path string) []quotatest.Step {
	t.Helper()
	steps, err := quotatest.ConsoleSteps(path)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

var spaces = regexp.MustCompile(`[ \t]+`)

// normalize drops trailing blank lines and collapses runs of spaces, so that
// a column's width is not part of the comparison.
func normalize(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, strings.TrimSpace(spaces.ReplaceAllString(l, " ")))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// matches compares output with the walkthrough: equal line by line, except
// that a shown line ending in "..." matches any line with that prefix.
func matches(got, want []string) bool {
	got, want = normalize(got), normalize(want)
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if p, ok := strings.CutSuffix(want[i], "..."); ok {
			if !strings.HasPrefix(got[i], strings.TrimSpace(p)) {
				return false
			}
			continue
		}
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// readOnly commands are retried until their output matches (the engine and
// the controllers converge asynchronously); any other command runs once.
func readOnly(command string) bool {
	return strings.HasPrefix(command, "kubectl get ")
}

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestWalkthrough applies the starter set in examples/tenancy the way the
// walkthrough does and checks every output it shows.
func TestWalkthrough(t *testing.T) {
	tools.Require(t, tools.Kubectl) // the walkthrough is checked with the kubectl users run
	quotatest.Exclusive(t)
	testserver.Quiet()
	eo := quotatest.FastEngineOptions()
	srv, err := testserver.Start(testserver.Options{Engine: &eo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	root := repoRoot(t)
	steps := readWalkthrough(t, filepath.Join(root, "examples", "README.md"))
	if len(steps) < 10 {
		t.Fatalf("the walkthrough has %d commands; want the whole walkthrough", len(steps))
	}
	for _, s := range steps {
		deadline := time.Now().Add(45 * time.Second)
		for {
			cmd := exec.Command("sh", "-c", s.Command)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "KUBECONFIG="+srv.Kubeconfig)
			out, _ := cmd.CombinedOutput()
			got := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			if string(out) == "" {
				got = nil
			}
			if matches(got, s.Want) {
				break
			}
			if !readOnly(s.Command) || time.Now().After(deadline) {
				t.Fatalf("examples/README.md:%d: $ %s\ngot:\n%s\nwant:\n%s", s.Line, s.Command, out, strings.Join(s.Want, "\n"))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}
