package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/verify"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// runCommand runs the quotaplane binary and returns its exit code and output.
func runCommand(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	return runCommandEnv(t, nil, bin, args...)
}

// runCommandEnv is runCommand with env added to the test's environment.
func runCommandEnv(t *testing.T, env []string, bin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("running %s: %v", bin, err)
	return 0, "", ""
}

// TestCommand runs `quotaplane verify` as a user does and checks its exit
// codes: 0 for a clean plane, 1 for discrepancies, 2 when it cannot run;
// and that --data-dir finds the kubeconfig and etcd of a local server.
func TestCommand(t *testing.T) {
	bin := quotatest.BuildBinary(t)
	// The embedded etcd accepts only serve's client certificate, which serve
	// records in its data directory.
	loc, err := formats.ReadEtcdFile(srv.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	withEtcd := []string{"verify", "--kubeconfig", srv.Kubeconfig, "--etcd-servers", strings.Join(srv.EtcdServers, ","),
		"--etcd-cafile", loc.CAFile, "--etcd-certfile", loc.CertFile, "--etcd-keyfile", loc.KeyFile}

	code, out, errOut := runCommand(t, bin, withEtcd...)
	if code != verify.ExitClean || !strings.Contains(out, "No discrepancies.") {
		t.Errorf("a clean plane: exit %d, want %d\n%s%s", code, verify.ExitClean, out, errOut)
	}

	// --data-dir: the server's admin kubeconfig, and the etcd recorded in
	// its data directory.
	loc.Servers, loc.Prefix = srv.EtcdServers, etcdPrefix
	if err := formats.WriteEtcdFile(srv.DataDir, loc); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCommand(t, bin, "verify", "--data-dir", srv.DataDir, "-o", "json")
	var report verify.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("-o json printed no report (%v):\n%s%s", err, out, errOut)
	}
	if code != verify.ExitClean || report.Etcd != strings.Join(srv.EtcdServers, ",") {
		t.Errorf("--data-dir: exit %d, etcd %q; want %d and the recorded etcd %v", code, report.Etcd, verify.ExitClean, srv.EtcdServers)
	}

	// Discrepancies: a grant held in flight for ten minutes, in a journal
	// under another prefix that no engine reads.
	const prefix = "/verify-command-test"
	key := formats.AdmissionGrantsPrefix(prefix) + "ns/late"
	etcd := etcdClient(t, srv)
	putJSON(t, etcd, key, map[string]any{"ns": "ns", "n": "late", "p": "p", "r": "secrets.v1", "u": "no-such-uid",
		"s": quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{Kind: "Organization", APIGroup: "resourcemanager.miloapis.com", Name: "o"},
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/things", Amount: 1}}},
		"c": metav1.NewTime(time.Now().Add(-10 * time.Minute))})
	defer func() { _, _ = etcd.Delete(context.Background(), key) }()
	code, out, errOut = runCommand(t, bin, append(withEtcd, "--etcd-prefix", prefix, "--recheck-after", "0")...)
	if code != verify.ExitDiscrepancies || !strings.Contains(out, "inflight-overdue: ") || !strings.Contains(out, "to repair: ") {
		t.Errorf("a grant held past its deadline: exit %d, want %d\n%s%s", code, verify.ExitDiscrepancies, out, errOut)
	}

	// The kubeconfig found as kubectl finds it: $KUBECONFIG alone.
	code, out, errOut = runCommandEnv(t, []string{"KUBECONFIG=" + srv.Kubeconfig}, bin, "verify", "--recheck-after", "0")
	if code == verify.ExitCannotRun || !strings.Contains(out, "Summary") {
		t.Errorf("verify with only $KUBECONFIG: exit %d\n%s%s", code, out, errOut)
	}
	// No kubeconfig anywhere: one line saying where one is looked for.
	code, out, errOut = runCommandEnv(t, []string{"KUBECONFIG=", "HOME=" + t.TempDir(), "KUBERNETES_SERVICE_HOST="}, bin, "verify")
	if code != verify.ExitCannotRun || !strings.Contains(errOut, "--kubeconfig") || !strings.Contains(errOut, "$KUBECONFIG") {
		t.Errorf("verify without any kubeconfig: exit %d, want %d and a line naming --kubeconfig and $KUBECONFIG\n%s%s", code, verify.ExitCannotRun, out, errOut)
	}

	// Cannot run.
	for _, args := range [][]string{
		{"verify", "--kubeconfig", "/no/such/kubeconfig"},
		{"verify", "--kubeconfig", srv.Kubeconfig, "--etcd-servers", "http://127.0.0.1:1"},
		{"verify", "--no-such-flag"},
	} {
		code, out, errOut = runCommand(t, bin, args...)
		if code != verify.ExitCannotRun || !strings.Contains(errOut, "Error") {
			t.Errorf("%v: exit %d, want %d\n%s%s", args, code, verify.ExitCannotRun, out, errOut)
		}
	}
}
