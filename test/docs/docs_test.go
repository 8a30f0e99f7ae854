package docs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

const (
	// blockTimeout bounds one block; documentTimeout all of a document's.
	blockTimeout    = 60 * time.Second
	documentTimeout = 150 * time.Second
	// stopTimeout is how long a background block has to end on SIGTERM.
	stopTimeout = 20 * time.Second
)

// runElsewhere are the documents whose run blocks another test runs; this
// one checks their markers only.
var runElsewhere = map[string]string{
	"examples/README.md": "test/examples (TestWalkthrough), which also compares each command's output with the one shown",
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// documents are the Markdown files whose command blocks are checked,
// relative to the repository's root.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", "examples/README.md", "examples/owning-service/README.md", "deploy/chart/quotaplane/README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(strings.TrimPrefix(d, repoRoot()+string(filepath.Separator))))
	}
	return out
}

func parseFile(t *testing.T, doc string) ([]Block, []error) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(repoRoot(), doc))
	if err != nil {
		t.Fatal(err)
	}
	return Parse(string(text))
}

// TestEveryCommandBlockIsMarked: every fence says what it holds, and every
// command block says whether it runs.
func TestEveryCommandBlockIsMarked(t *testing.T) {
	for _, doc := range documents(t) {
		blocks, errs := parseFile(t, doc)
		for _, err := range errs {
			t.Errorf("%s: %v", doc, err)
		}
		count := map[Mode]int{}
		for _, b := range blocks {
			if b.Command() {
				count[b.Mode]++
			}
		}
		t.Logf("%s: %d run, %d background, %d skip", doc, count[Run], count[Background], count[Skip])
	}
}

// TestRunBlocks runs every run block of every document as written, one
// document at a time (the README's server takes serve's default port).
func TestRunBlocks(t *testing.T) {
	tools.Require(t, tools.Kubectl)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("the blocks run with bash, which is not on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(quotatest.BuildBinary(t), filepath.Join(bin, "quotaplane")); err != nil {
		t.Fatal(err)
	}
	// The example owning service's walkthrough runs it from PATH.
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", filepath.Join(bin, "owning-service"), "./examples/owning-service")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building examples/owning-service: %v\n%s", err, out)
	}
	began := time.Now()
	for _, doc := range documents(t) {
		blocks, errs := parseFile(t, doc)
		if len(errs) > 0 {
			t.Errorf("%s: not run: its markers are wrong (TestEveryCommandBlockIsMarked)", doc)
			continue
		}
		if by, ok := runElsewhere[doc]; ok {
			t.Logf("%s: run by %s", doc, by)
			continue
		}
		if !slices.ContainsFunc(blocks, func(b Block) bool { return b.Mode == Run || b.Mode == Background }) {
			continue
		}
		t.Run(doc, func(t *testing.T) {
			// A document whose commands make certificates needs openssl.
			if slices.ContainsFunc(blocks, func(b Block) bool {
				return (b.Mode == Run || b.Mode == Background) && strings.Contains(b.Body, "openssl ")
			}) {
				tools.Require(t, tools.Openssl)
			}
			runDocument(t, doc, blocks, bin)
		})
	}
	t.Logf("every document's blocks in %s", time.Since(began).Round(100*time.Millisecond))
}

// prelude carries a document's terminal from block to block: its exported
// variables and working directory, saved in $1 when a block ends.
const prelude = `set -euo pipefail
. "$1/env"
cd "$(cat "$1/cwd")"
trap 'export -p | grep -Ev "^declare -x (PWD|OLDPWD|SHLVL|SHELLOPTS|BASHOPTS)=" >"$1/env"; pwd >"$1/cwd"' EXIT
`

// backgroundPrelude is the prelude of a block that runs beside the others,
// as in a second terminal: it starts where the document is and keeps nothing.
const backgroundPrelude = `set -euo pipefail
. "$1/env"
cd "$(cat "$1/cwd")"
`

// runDocument runs the document's run and background blocks in order in a
// fresh directory and stops at the first that fails.
func runDocument(t *testing.T, doc string, blocks []Block, bin string) {
	work, state := t.TempDir(), t.TempDir()
	if err := errors.Join(os.WriteFile(filepath.Join(state, "env"), nil, 0o600),
		os.WriteFile(filepath.Join(state, "cwd"), []byte(work), 0o600)); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + work, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "HOME", "PATH", "KUBECONFIG", "PWD", "OLDPWD", "CDPATH", "BASH_ENV", "ENV":
		default:
			env = append(env, kv)
		}
	}
	deadline := time.Now().Add(documentTimeout)
	var background []*process
	defer func() {
		for _, p := range slices.Backward(background) {
			p.stop(t)
		}
	}()
	for i, b := range blocks {
		if b.Mode != Run && b.Mode != Background {
			continue
		}
		if b.Mode == Background {
			checkPorts(t, doc, b)
		}
		script := filepath.Join(state, fmt.Sprintf("block-%d.sh", i))
		pre := prelude
		if b.Mode == Background {
			pre = backgroundPrelude
		}
		if err := os.WriteFile(script, []byte(pre+b.Script()), 0o600); err != nil {
			t.Fatal(err)
		}
		timeout := min(blockTimeout, time.Until(deadline))
		p := start(t, script, state, work, env)
		started := time.Now()
		var err error
		if b.Mode == Background {
			background = append(background, p)
			err = p.waitFor(b.Ready, timeout)
		} else {
			err = p.wait(timeout)
		}
		if err != nil {
			t.Errorf("%s:%d: %v after %s\n%s\n--- its output:\n%s", doc, b.Line, err,
				time.Since(started).Round(100*time.Millisecond), indent(b.Body), p.out.Tail())
			return
		}
		t.Logf("%s:%d: ok in %s", doc, b.Line, time.Since(started).Round(100*time.Millisecond))
	}
}

// process is a block's bash, in a process group of its own.
type process struct {
	cmd  *exec.Cmd
	out  *quotatest.SyncBuffer
	done chan error
}

func start(t *testing.T, script, state, dir string, env []string) *process {
	p := &process{out: &quotatest.SyncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command("bash", script, state)
	p.cmd.Dir, p.cmd.Env = dir, env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	return p
}

// wait waits for the block to end; it fails when the block fails or outlasts
// timeout. Whatever the block left running is killed.
func (p *process) wait(timeout time.Duration) error {
	defer p.signal(syscall.SIGKILL)
	select {
	case err := <-p.done:
		if err != nil {
			return fmt.Errorf("the block failed (%v)", err)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("the block did not end within %s", timeout)
	}
}

// waitFor waits until the background block's output holds ready.
func (p *process) waitFor(ready string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(p.out.String(), ready) {
		select {
		case err := <-p.done:
			p.done <- err
			return fmt.Errorf("the background block ended (%v) before its output said %q", err, ready)
		case <-ctx.Done():
			return fmt.Errorf("the background block's output did not say %q within %s", ready, timeout)
		case <-tick.C:
		}
	}
	return nil
}

// stop ends a background block: SIGTERM to its process group, SIGKILL if it
// has not ended within stopTimeout.
func (p *process) stop(t *testing.T) {
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		t.Logf("a background block did not end within %s of SIGTERM; killed", stopTimeout)
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}

func (p *process) signal(s syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, s) }

// checkPorts fails the test at once when a port a background block listens
// on is taken by another process: serve's --secure-port and --peer-port
// (6443 when a serve gives no --secure-port), the webhook's --secure-port
// and the URLs of etcd's --listen-*-urls. The documents' fixed ports are below the ephemeral range,
// so no other test's port 0 takes them; a program outside the suite may.
func checkPorts(t *testing.T, doc string, b Block) {
	for _, port := range listenPorts(b.Body) {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			t.Fatalf("%s:%d listens on port %s, which another process holds: %v", doc, b.Line, port, err)
		}
		_ = l.Close()
	}
}

var (
	portFlag       = regexp.MustCompile(`--(?:secure|peer)-port[ =](\d+)`)
	listenURLsFlag = regexp.MustCompile(`--listen-[a-z]+-urls[ =](\S+)`)
)

// listenPorts are the ports a block's commands listen on, as checkPorts
// reads them.
func listenPorts(body string) []string {
	var ports []string
	for _, m := range portFlag.FindAllStringSubmatch(body, -1) {
		ports = append(ports, m[1])
	}
	if strings.Contains(body, "quotaplane serve") && !strings.Contains(body, "--secure-port") {
		ports = append(ports, "6443")
	}
	for _, m := range listenURLsFlag.FindAllStringSubmatch(body, -1) {
		for _, raw := range strings.Split(m[1], ",") {
			if u, err := url.Parse(raw); err == nil && u.Port() != "" {
				ports = append(ports, u.Port())
			}
		}
	}
	return ports
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// TestRunBlocksFailsInCIWithoutKubectl: with CI=true and no kubectl on PATH,
// TestRunBlocks fails, naming kubectl, instead of skipping.
func TestRunBlocksFailsInCIWithoutKubectl(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunBlocks$", "-test.v")
	cmd.Env = []string{"PATH=" + t.TempDir(), "CI=true", "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--- FAIL: TestRunBlocks") || !strings.Contains(string(out), "kubectl is not on PATH") {
		t.Errorf("TestRunBlocks without kubectl, CI=true: want it to fail naming kubectl; err=%v:\n%s", err, out)
	}
}
