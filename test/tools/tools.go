package tools

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Tool is a program a test drives.
type Tool string

const (
	// Kubectl is the Kubernetes CLI. Debian's package is too old for the
	// skew policy; `.ci/run` builds one from the pinned Kubernetes module
	// when none is on PATH (hack/kubectl).
	Kubectl Tool = "kubectl"
	// Chromium drives the portal's browser tests headless.
	Chromium Tool = "chromium"
	// Prometheus scrapes serve in the monitoring tests and the
	// observability benchmark.
	Prometheus Tool = "prometheus"
	// Promtool checks and unit-tests the shipped alert rules.
	Promtool Tool = "promtool"
	// Openssl makes the certificates of docs/operations.md's three-member
	// recipe, which test/docs runs.
	Openssl Tool = "openssl"
)

// All are the tools tests drive.
func All() []Tool { return []Tool{Kubectl, Chromium, Prometheus, Promtool, Openssl} }

// Executables are the names the tool may have on PATH, the preferred first.
func (t Tool) Executables() []string {
	if t == Chromium {
		return []string{"chromium", "chromium-browser", "google-chrome", "chrome"}
	}
	return []string{string(t)}
}

// Install says how to install the tool.
func (t Tool) Install() string {
	switch t {
	case Kubectl:
		return "install kubectl 1.35 or later, or build one from the pinned module: go build -tags kubectl -o ~/go/bin/kubectl ./hack/kubectl"
	case Chromium:
		return "install Debian's chromium package: apt-get install chromium"
	case Prometheus:
		return "install Debian's prometheus package: apt-get install prometheus"
	case Promtool:
		return "install Debian's prometheus package (it ships promtool): apt-get install prometheus"
	case Openssl:
		return "install Debian's openssl package: apt-get install openssl"
	}
	return "install " + string(t)
}

// InCI reports whether the tests run in CI: the environment variable CI is
// "true" (or "1").
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// Require returns the path of tool. When it is not on PATH the test fails in
// CI and skips elsewhere, naming the tool and how to install it; either way
// the test goes no further.
func Require(tb testing.TB, tool Tool) string {
	tb.Helper()
	for _, name := range tool.Executables() {
		if p, err := exec.LookPath(name); err == nil {
			tb.Logf("uses-tool: %s %s", tool, p)
			return p
		}
	}
	looked := strings.Join(tool.Executables(), ", ")
	if InCI() {
		tb.Fatalf("%s is not on PATH (looked for %s) and CI=true: this test must run in CI; %s (.ci/run installs it)",
			tool, looked, tool.Install())
	}
	tb.Skipf("%s is not on PATH (looked for %s): skipping; %s. With CI=true this test fails instead.",
		tool, looked, tool.Install())
	return ""
}
