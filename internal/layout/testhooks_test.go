package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// testHooksTag is the build tag that compiles the test hooks into the
// binary (quotatest.TestHooksTag).
const testHooksTag = "quotaplane_testhooks"

// hookFiles hold the test hooks, by path from the repository's root:
// serve's and controller's hidden --grant-clock-offset (built only with
// testHooksTag) and the switchable admission faults of the in-process test
// server. None may be compiled into the shipped binary.
var hookFiles = []string{"cmd/quotaplane/testhooks.go", "internal/testserver/faults.go"}

// TestTheShippedBinaryHasNoTestHooks: the Go files the shipped binary is
// built from (`go list -deps ./cmd/quotaplane`, without tags) include no
// hook file and no package of the test harness, and none of them declares
// an injection setter (InjectFailure, InjectAdmittedDelay, any Inject*) or
// names the flag --grant-clock-offset. Built with the hooks' tag, the hook
// file and its flag are found, so the check cannot pass by finding nothing.
func TestTheShippedBinaryHasNoTestHooks(t *testing.T) {
	r := root(t)
	for _, f := range hookFiles {
		if _, err := os.Stat(filepath.Join(r, f)); err != nil {
			t.Errorf("hook file %s: %v (if it moved, name its new path here)", f, err)
		}
	}

	shipped, pkgs := shippedFiles(t, r, "")
	for _, f := range hookFiles {
		if slices.Contains(shipped, f) {
			t.Errorf("the shipped binary is built from the test hook file %s; keep hooks in _test.go files or behind the build tag %s", f, testHooksTag)
		}
	}
	for _, p := range pkgs {
		if p == "internal/testserver" || p == "test" || strings.HasPrefix(p, "test/") {
			t.Errorf("the shipped binary is built from the test package %s", p)
		}
	}
	if found := hooksIn(t, r, shipped); len(found) > 0 {
		t.Errorf("test hooks in the files of the shipped binary:\n%s", strings.Join(found, "\n"))
	}

	hooked, _ := shippedFiles(t, r, testHooksTag)
	if !slices.Contains(hooked, hookFiles[0]) {
		t.Fatalf("built with -tags %s, ./cmd/quotaplane is not built from %s: the checks above prove nothing", testHooksTag, hookFiles[0])
	}
	if found := hooksIn(t, r, hooked); !slices.ContainsFunc(found, func(s string) bool {
		return strings.HasPrefix(s, hookFiles[0]+":") && strings.Contains(s, "grant-clock-offset")
	}) {
		t.Errorf("built with -tags %s, the flag --grant-clock-offset of %s is not found (found %q): the check of the shipped files proves nothing", testHooksTag, hookFiles[0], found)
	}
}

// shippedFiles lists the module's Go files (not tests) ./cmd/quotaplane is
// built from with tags, and their packages, by path from the root r.
func shippedFiles(t *testing.T, r, tags string) (files, pkgs []string) {
	t.Helper()
	// -tags is always given, so that GOFLAGS cannot add the hooks' tag to
	// the shipped build.
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-tags", tags, "-deps", "-f", "{{.Dir}} {{.GoFiles}}", "./cmd/quotaplane")
	cmd.Dir = r
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -tags %q -deps ./cmd/quotaplane: %v\n%s", tags, err, stderr)
	}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		i := strings.LastIndex(line, " [")
		if i < 0 || !strings.HasSuffix(line, "]") {
			t.Fatalf("go list printed %q, want a directory and its files", line)
		}
		rel, err := filepath.Rel(r, line[:i])
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue // the standard library and other modules
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
		for name := range strings.FieldsSeq(line[i+2 : len(line)-1]) {
			files = append(files, filepath.ToSlash(filepath.Join(rel, name)))
		}
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list -tags %q names %d of the module's packages for ./cmd/quotaplane; want them all:\n%s", tags, len(pkgs), out)
	}
	sort.Strings(files)
	return files, pkgs
}

// hooksIn reports, as "file:line: what", each function named Inject* and
// each string naming the flag grant-clock-offset in files.
func hooksIn(t *testing.T, r string, files []string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var found []string
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(r, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		at := func(pos token.Pos) string { return rel + ":" + strconv.Itoa(fset.Position(pos).Line) }
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if strings.HasPrefix(n.Name.Name, "Inject") {
					found = append(found, at(n.Pos())+": declares "+n.Name.Name)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && strings.Contains(n.Value, "grant-clock-offset") {
					found = append(found, at(n.Pos())+": names the flag grant-clock-offset")
				}
			}
			return true
		})
	}
	return found
}
