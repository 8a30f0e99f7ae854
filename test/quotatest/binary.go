package quotatest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// built builds the binary once per test process.
var built = sync.OnceValues(sharedBuild)

// BuildBinary builds the quotaplane binary once for every test process of a
// run: the binary is kept in the temporary directory under a key of the
// sources and the git state, and the packages that need it (about ten, run
// two at a time) take turns on a file lock, so the first builds and the
// others reuse it (a link is ~10 s of CPU each on the 2-core machine).
func BuildBinary(t testing.TB) string {
	t.Helper()
	binPath, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return binPath
}

func sharedBuild() (string, error) { return BuildShared("./cmd/quotaplane", "quotaplane") }

// SharedBinary is BuildBinary outside a test: hack/image packs the very
// binary the tests run into the image (.ci/run), built once for both.
func SharedBinary() (string, error) { return built() }

// TestHooksTag is the build tag that compiles quotaplane's test hooks into
// the binary (cmd/quotaplane/testhooks.go: the hidden --grant-clock-offset
// of serve and controller). The shipped binary is built without it.
const TestHooksTag = "quotaplane_testhooks"

// builtHooked builds the hooked binary once per test process.
var builtHooked = sync.OnceValues(func() (string, error) {
	return buildShared("./cmd/quotaplane", "quotaplane-testhooks", []string{TestHooksTag})
})

// BuildHookedBinary builds the quotaplane binary with the test hooks
// (-tags quotaplane_testhooks), for the tests that need a flag the shipped
// binary does not have. It is built and shared like BuildBinary's, under
// its own name, so the two never stand for each other.
func BuildHookedBinary(t testing.TB) string {
	t.Helper()
	binPath, err := builtHooked()
	if err != nil {
		t.Fatal(err)
	}
	return binPath
}

// BuildShared builds package pkg as the binary name, once for every test
// process of a run (see BuildBinary); dirs are the directories besides
// quotaplane's own whose sources it is built from.
func BuildShared(pkg, name string, dirs ...string) (string, error) {
	return buildShared(pkg, name, nil, dirs...)
}

// buildShared is BuildShared with build tags, which go into the binary's
// key: a binary is reused only for the same sources and the same tags.
func buildShared(pkg, name string, tags []string, dirs ...string) (string, error) {
	root := moduleRoot()
	key, err := sourceKey(root, dirs...)
	if err != nil {
		return "", err
	}
	if len(tags) > 0 {
		sum := sha256.Sum256([]byte(key + " tags " + strings.Join(tags, ",")))
		key = hex.EncodeToString(sum[:])[:20]
	}
	dir := filepath.Join(os.TempDir(), "quotaplane-test-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name+"-"+key)
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	removeStale(dir, bin)
	// Without the symbol table and DWARF (-s -w), as a release: a faster
	// link and a third smaller image (the image packs this binary).
	args := []string{"build", "-buildvcs=auto", "-ldflags=-s -w"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append(args, "-o", bin+".tmp", pkg)...)
	cmd.Dir = root
	// Static, as the image's (hack/image packs this very binary onto an
	// empty base): with cgo, a machine with a C compiler would link libc.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, os.Rename(bin+".tmp", bin)
}

// sourceKey names the sources a binary is built from: every file under the
// directories compiled into it (path, size, modification time) and the git
// state the build stamps (HEAD and whether the tree is modified).
func sourceKey(root string, extra ...string) (string, error) {
	h := sha256.New()
	for _, dir := range append([]string{"api", "cmd", "config", "internal", "go.mod", "go.sum"}, extra...) {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %d %d\n", strings.TrimPrefix(path, root), info.Size(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"status", "--porcelain"}} {
		out, _ := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		h.Write(out)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// removeStale deletes binaries of other sources left for more than a day.
func removeStale(dir, keep string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if info, err := e.Info(); err == nil && !strings.HasPrefix(p, keep) && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.Remove(p)
		}
	}
}

// ModuleRoot is the repository root, found from this file's location.
func ModuleRoot() string { return moduleRoot() }

// moduleRoot is the repository root, found from this file's location.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
