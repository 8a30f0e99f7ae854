// Package e2e builds the quotaplane binary and drives `quotaplane serve` the
// way a newcomer does: start it, use kubectl against the kubeconfig it writes,
// stop it with a signal, start it again.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/test/manifests"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
	"github.com/quotaplane/quotaplane/test/tools"
)

const (
	// readyLimit bounds start to ready (timed.Within). The goal, under 10 s,
	// is measured by this test alone (docs/operations.md, "Start-up time and memory").
	// Bound 90 s (was 15 s), at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 3.05 s here alone (3 runs; 5.8-6.5 s on a slower day).
	readyLimit = 90 * time.Second
	// rssLimitMi is the serve issue's goal for idle RSS (memory, not time).
	rssLimitMi = 300
)

func buildBinary(t *testing.T) string {
	t.Helper()
	return quotatest.BuildBinary(t)
}

func freePort(t *testing.T) int {
	t.Helper()
	return quotatest.FreePort(t)
}

type serveProcess struct {
	cmd     *exec.Cmd
	banner  string
	ready   time.Duration
	stderr  *bytes.Buffer
	exitErr chan error
}

// startServe starts `quotaplane serve` and waits for its one-line banner.
func startServe(t *testing.T, bin, dataDir string, port int, args ...string) *serveProcess {
	t.Helper()
	p := &serveProcess{stderr: &bytes.Buffer{}, exitErr: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"serve", "--data-dir", dataDir, "--secure-port", strconv.Itoa(port)}, args...)...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			select {
			case lines <- s.Text():
			default:
			}
		}
		p.exitErr <- p.cmd.Wait()
	}()
	select {
	case p.banner = <-lines:
		p.ready = time.Since(began)
	case err := <-p.exitErr:
		t.Fatalf("serve exited before it was ready: %v\n%s", err, tail(p.stderr))
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("serve printed nothing within 2 minutes\n%s", tail(p.stderr))
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *serveProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exitErr:
		if err != nil {
			t.Fatalf("serve did not exit cleanly on SIGTERM: %v\n%s", err, tail(p.stderr))
		}
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("serve did not exit within a minute of SIGTERM")
	}
}

func rssMiB(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		if tools.InCI() {
			t.Fatalf("cannot read serve's memory from /proc, and CI=true: the RSS check cannot run: %v", err)
		}
		t.Skipf("cannot read process memory (no /proc here?): %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

func tail(b *bytes.Buffer) string {
	s := b.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

func kubectl(t *testing.T, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustKubectl(t *testing.T, kubeconfig, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(t, kubeconfig, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestServe is the newcomer's path: quotaplane serve, then kubectl.
func TestServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	quotatest.Exclusive(t) // it measures start-up time
	dataDir := filepath.Join(t.TempDir(), "data")
	port := freePort(t)
	p := startServe(t, bin, dataDir, port)
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")

	t.Logf("ready after %s; banner: %s", p.ready, p.banner)
	if !strings.Contains(p.banner, kubeconfig) || !strings.Contains(p.banner, "kubectl") {
		t.Errorf("the banner should say where the kubeconfig is and what to try, got %q", p.banner)
	}
	timed.Within(t, "serve on an empty data directory: start to ready", p.ready, readyLimit)
	time.Sleep(5 * time.Second) // let start-up garbage be collected
	rss := rssMiB(t, p.cmd.Process.Pid)
	t.Logf("idle RSS %d MiB", rss)
	if rss > rssLimitMi {
		t.Errorf("idle RSS %d MiB, limit %d MiB", rss, rssLimitMi)
	}

	t.Run("second server on the same data dir is refused", func(t *testing.T) {
		cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--secure-port", strconv.Itoa(freePort(t)))
		began := time.Now()
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatal("the second server started")
		}
		if !strings.Contains(string(out), "already in use by another quotaplane server") {
			t.Errorf("unclear refusal: %s", out)
		}
		// Bound 5 s, at least 5x the CI-load median (docs/benchmarks.md):
		// a median of 106 ms here alone (3 runs).
		timed.Within(t, "a second serve on a data directory in use refused", time.Since(began), 5*time.Second)
	})

	t.Run("the binary and the server name the build", func(t *testing.T) {
		out, err := exec.Command(bin, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("quotaplane version: %v\n%s", err, out)
		}
		version := strings.TrimSpace(string(out))
		// go build in a clone stamps the revision (BuildBinary asks for it).
		if head, err := exec.Command("git", "-C", quotatest.ModuleRoot(), "rev-parse", "HEAD").Output(); err == nil {
			rev := strings.TrimSpace(string(head))
			if !strings.Contains(version, "revision "+rev) || !strings.Contains(version, "dev-"+rev[:12]) {
				t.Errorf("quotaplane version says %q; want revision %s", version, rev)
			}
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		info, err := kubernetes.NewForConfigOrDie(cfg).Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		short := strings.Fields(version)[1]
		if info.GitVersion != "v1.36.3+quotaplane."+short || info.Major != "1" || info.Minor != "36" {
			t.Errorf("the server reports %s (%s.%s); want v1.36.3+quotaplane.%s, 1.36", info.GitVersion, info.Major, info.Minor, short)
		}
	})

	tools.Require(t, tools.Kubectl)
	resources := mustKubectl(t, kubeconfig, "", "api-resources", "--api-group", "quota.miloapis.com", "-o", "name")
	for _, r := range []string{"resourceregistrations", "resourcegrants", "resourceclaims", "allowancebuckets", "claimcreationpolicies", "grantcreationpolicies"} {
		if !strings.Contains(resources, r+".quota.miloapis.com") {
			t.Errorf("kubectl api-resources lacks %s:\n%s", r, resources)
		}
	}
	explain := mustKubectl(t, kubeconfig, "", "explain", "resourceclaim.spec.requests")
	for _, want := range []string{"amount", "resourceType", "dimensions", "baseUnit"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain resourceclaim.spec.requests does not document %q:\n%s", want, explain)
		}
	}

	mustKubectl(t, kubeconfig, "", "create", "namespace", "walkthrough")
	// A platform namespace: the walkthrough's grant names an organization.
	mustKubectl(t, kubeconfig, "", "label", "namespace", "walkthrough", "quota.miloapis.com/platform=true")
	mustKubectl(t, kubeconfig, "", "-n", "walkthrough", "create", "secret", "generic", "s1", "--from-literal=k=v")
	for kind, manifest := range map[string]string{
		"resourceregistration": manifests.Registration("projects-per-organization", "resourcemanager.miloapis.com/projects"),
		"resourcegrant":        manifests.Grant("walkthrough", "acme-corp-project-quota"),
		"resourceclaim":        manifests.Claim("walkthrough", "web-app-project-claim"),
		"allowancebucket":      manifests.Bucket("walkthrough", "acme-corp-projects"),
		"claimcreationpolicy":  manifests.ClaimPolicy("project-quota-enforcement"),
		"grantcreationpolicy":  manifests.GrantPolicy("organization-project-quota"),
	} {
		out := mustKubectl(t, kubeconfig, manifest, "create", "-f", "-")
		if !strings.Contains(out, "created") {
			t.Errorf("kubectl create %s: %s", kind, out)
		}
		if out := mustKubectl(t, kubeconfig, "", "get", kind, "-A"); !strings.Contains(out, "NAME") {
			t.Errorf("kubectl get %s: %s", kind, out)
		}
		if kind != "resourceclaim" && kind != "resourceregistration" { // kept to check the restart
			if out := mustKubectl(t, kubeconfig, manifest, "delete", "-f", "-"); !strings.Contains(out, "deleted") {
				t.Errorf("kubectl delete %s: %s", kind, out)
			}
		}
	}
	if out := mustKubectl(t, kubeconfig, "", "-n", "walkthrough", "get", "secret", "s1", "-o", "jsonpath={.data.k}"); out != "dg==" {
		t.Errorf("secret data = %q", out)
	}
	mustKubectl(t, kubeconfig, "", "delete", "resourceregistration", "projects-per-organization")

	// SIGTERM stops the server cleanly; a restart on the same data dir keeps
	// everything.
	p.stop(t)
	p2 := startServe(t, bin, dataDir, port)
	t.Logf("restart ready after %s", p2.ready)
	if out := mustKubectl(t, kubeconfig, "", "-n", "walkthrough", "get", "secret", "s1", "-o", "jsonpath={.data.k}"); out != "dg==" {
		t.Errorf("secret after restart = %q", out)
	}
	if out := mustKubectl(t, kubeconfig, "", "-n", "walkthrough", "get", "resourceclaim", "web-app-project-claim", "-o", "name"); !strings.Contains(out, "web-app-project-claim") {
		t.Errorf("claim after restart: %s", out)
	}
	if out, err := kubectl(t, kubeconfig, "", "get", "resourceregistration", "projects-per-organization"); err == nil {
		t.Errorf("a deleted registration came back after restart: %s", out)
	}
	mustKubectl(t, kubeconfig, "", "delete", "namespace", "walkthrough", "--wait=true", "--timeout=90s")
	p2.stop(t)
}

// TestControllerRefusesServe: quotaplane controller pointed at a quotaplane
// serve would decide without admission's journal; it exits at once, saying
// why, and serve's engine goes on deciding.
func TestControllerRefusesServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	p := startServe(t, bin, dataDir, freePort(t))
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	// serve's engine has stamped its ledger once the ledger exists.
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		out, err := kubectl(t, kubeconfig, "", "get", "configmap", "-n", "quotaplane-system", "quotaplane-decision-ledger", "-o", "jsonpath={.data.admission-journal}")
		return err == nil && out == "true", nil
	}); err != nil {
		t.Fatal("serve's ledger never said its journal is in use")
	}
	cmd := exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--metrics-bind-address", "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("quotaplane controller against serve exited 0; want a refusal")
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("quotaplane controller against serve still runs after 30s\n%s", stderr.String())
	}
	for _, want := range []string{"quotaplane serve", "journal", "refuses"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the refusal lacks %q:\n%s", want, stderr.String())
		}
	}
	mustKubectl(t, kubeconfig, "", "get", "resourceclaims", "-A")
	p.stop(t)
}

// killTarget is a serve the kill tests SIGKILL, and how to start it again
// on the same data directory and port.
type killTarget struct {
	bin, dataDir string
	port         int
	// proc is the running serve; cfg and c reach it as admin, with a rate
	// limit high enough to load it.
	proc *serveProcess
	cfg  *rest.Config
	c    client.Client
}

// serveForKill builds the binary and starts serve on a fresh data directory.
func serveForKill(t *testing.T) *killTarget {
	t.Helper()
	k := &killTarget{bin: buildBinary(t), dataDir: filepath.Join(t.TempDir(), "data"), port: freePort(t)}
	k.proc = startServe(t, k.bin, k.dataDir, k.port)
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(k.dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	k.cfg, k.c = cfg, quotatest.NewClient(t, cfg)
	return k
}

// restart starts serve again after a kill, with args added.
func (k *killTarget) restart(t *testing.T, args ...string) {
	t.Helper()
	k.proc = startServe(t, k.bin, k.dataDir, k.port, args...)
}
