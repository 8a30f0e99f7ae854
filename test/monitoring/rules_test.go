// Package monitoring tests the shipped Prometheus rules and Grafana dashboard
// (deploy/monitoring): promtool's checks and unit tests, and a real
// Prometheus scraping two serve replicas, loading the rules and running every
// dashboard query.
package monitoring

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/quotaplane/quotaplane/test/tools"
)

// monitoringDir is deploy/monitoring, found from this file.
func monitoringDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "monitoring")
}

// TestRulesPromtool: the shipped rules are valid and their unit tests pass.
func TestRulesPromtool(t *testing.T) {
	promtool := tools.Require(t, tools.Promtool)
	for _, args := range [][]string{
		{"check", "rules", "quotaplane-rules.yaml"},
		{"test", "rules", "quotaplane-rules.test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = monitoringDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		} else {
			t.Logf("promtool %v:\n%s", args, out)
		}
	}
}
