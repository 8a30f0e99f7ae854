package tools

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// helperEnv makes the test binary, re-run, act as a test that needs a tool.
const helperEnv = "QUOTAPLANE_TOOLS_HELPER"

// TestNeedsEachTool is the test a child process runs: it requires the tool
// named by helperEnv and reports that it went on.
func TestNeedsEachTool(t *testing.T) {
	name := os.Getenv(helperEnv)
	if name == "" {
		t.Skip("run by TestAMissingToolFailsInCI in a child process")
	}
	for _, tool := range All() {
		if string(tool) == name {
			Require(t, tool)
			t.Log("went on with " + name)
			return
		}
	}
	t.Fatalf("no tool %q", name)
}

// run re-runs this test binary's TestNeedsEachTool for tool with an empty
// PATH, so that no tool can be found.
func run(t *testing.T, tool, ci string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNeedsEachTool$", "-test.v")
	cmd.Env = []string{helperEnv + "=" + tool, "PATH=" + t.TempDir(), "CI=" + ci, "HOME=" + os.Getenv("HOME")}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAMissingToolFailsInCI: with CI=true, a test whose tool was removed
// from PATH fails, naming the tool; without CI it skips, saying which tool
// to install. In neither case does it go on as if it had run.
func TestAMissingToolFailsInCI(t *testing.T) {
	for _, tool := range All() {
		t.Run(string(tool), func(t *testing.T) {
			out, err := run(t, string(tool), "true")
			if err == nil || !strings.Contains(out, "--- FAIL: TestNeedsEachTool") {
				t.Errorf("%s missing with CI=true: want the test to fail, got err=%v:\n%s", string(tool), err, out)
			}
			if !strings.Contains(out, string(tool)+" is not on PATH") || !strings.Contains(out, "CI=true") {
				t.Errorf("%s missing with CI=true: the failure does not name the tool:\n%s", string(tool), out)
			}
			out, err = run(t, string(tool), "")
			if err != nil || !strings.Contains(out, "--- SKIP: TestNeedsEachTool") || !strings.Contains(out, tool.Install()) {
				t.Errorf("%s missing outside CI: want a skip saying how to install it, got err=%v:\n%s", string(tool), err, out)
			}
			if strings.Contains(out, "went on with") {
				t.Errorf("%s missing: the test went on:\n%s", string(tool), out)
			}
		})
	}
}

// TestAPresentToolIsUsedAndLogged: a tool found on PATH is returned and
// logged for .ci/run's count.
func TestAPresentToolIsUsedAndLogged(t *testing.T) {
	dir := t.TempDir()
	fake := dir + "/promtool"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNeedsEachTool$", "-test.v")
	cmd.Env = []string{helperEnv + "=promtool", "PATH=" + dir, "CI=true"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "uses-tool: promtool "+fake) || !strings.Contains(string(out), "went on with promtool") {
		t.Errorf("promtool on PATH: want it found and logged, got err=%v:\n%s", err, out)
	}
}
