package quotatest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// quotatestPath is this package's import path.
const quotatestPath = "github.com/quotaplane/quotaplane/test/quotatest"

// rbacWaiters are the functions of this package that wait for RBAC's cache;
// any function of it that calls one waits too (ServiceAccountToken).
var rbacWaiters = []string{"WaitAllowed", "WaitBound", "WaitBoundOn"}

// TestEveryFreshBindingIsWaitedFor: every function of the tests (every Go
// file under test/, the _test.go files under cmd/) that creates a
// RoleBinding or ClusterRoleBinding — a binding literal naming subjects or
// a role, or a Create, Update, Apply or Patch through RoleBindings(ns) or
// ClusterRoleBindings() — waits for RBAC's cache after it: it calls, later
// in the function, quotatest.WaitAllowed, WaitBound, WaitBoundOn, a function
// of this package that calls one (ServiceAccountToken), or a function of
// its own package that does. A function that binds someone who never acts
// says so in a comment starting "rbac:" (with the reason) within it.
func TestEveryFreshBindingIsWaitedFor(t *testing.T) {
	r, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	for _, top := range []string{"test", "cmd"} {
		err := filepath.WalkDir(filepath.Join(r, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || top == "cmd" && !strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(r, filepath.Dir(path))
			pkgs[filepath.ToSlash(rel)] = append(pkgs[filepath.ToSlash(rel)], f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(pkgs["test/quotatest"]) == 0 {
		t.Fatalf("no files of test/quotatest under %s", r)
	}
	found, sites := unwaitedBindings(fset, pkgs, "test/quotatest")
	// The tree binds someone in some 30 places: finding none means the
	// check has stopped seeing them, not that they are gone.
	if sites < 15 {
		t.Fatalf("found %d binding sites under test/ and cmd/; want the 30 or so there are: the check proves nothing", sites)
	}
	for i := range found {
		if rel, err := filepath.Rel(r, found[i]); err == nil {
			found[i] = filepath.ToSlash(rel)
		}
	}
	if len(found) > 0 {
		t.Errorf("bindings acted on before RBAC's cache may have them (%d of %d binding sites):\n%s\n\n"+
			"The API server's RBAC authorizer reads bindings from an informer cache, so a request made at once as the subject can be refused (403) under load. "+
			"After creating the binding, call quotatest.WaitAllowed(t, kubes, user, groups, attrs...) — or WaitBound/WaitBoundOn for a ClusterRole — "+
			"with a client of every replica the subject will talk to; or, if no subject acts on it, say why in the function: // rbac: <reason>.",
			len(found), sites, strings.Join(found, "\n"))
	}
}

// unwaitedBindings reports, as "file:line: what", each binding site of
// pkgs (files by package directory; quotatest is this package's) not
// followed in its function by a wait, and counts the sites.
func unwaitedBindings(fset *token.FileSet, pkgs map[string][]*ast.File, quotatest string) (found []string, sites int) {
	ours := waiters(pkgs[quotatest], nil, rbacWaiters)
	dirs := make([]string, 0, len(pkgs))
	for dir := range pkgs {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		local := ours
		if dir != quotatest {
			local = waiters(pkgs[dir], ours, nil)
		}
		for _, f := range pkgs[dir] {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				bindings := bindingSites(f, fn)
				sites += len(bindings)
				if len(bindings) == 0 || optedOut(f, fn) {
					continue
				}
				waits := waitCalls(f, fn, ours, local, dir == quotatest)
				for _, b := range bindings {
					if !slices.ContainsFunc(waits, func(p token.Pos) bool { return p > b.pos }) {
						pos := fset.Position(b.pos)
						found = append(found, pos.Filename+":"+strconv.Itoa(pos.Line)+": "+fn.Name.Name+" "+b.what+" and waits for no RBAC cache after it")
					}
				}
			}
		}
	}
	return found, sites
}

type bindingSite struct {
	pos  token.Pos
	what string
}

// bindingSites are the places in fn that create or change a binding: a
// RoleBinding or ClusterRoleBinding literal (of k8s.io/api/rbac/v1) with
// Subjects or RoleRef, and a Create, Update, Apply or Patch called on a
// chain through RoleBindings(…) or ClusterRoleBindings() (a literal given
// to it is the same site).
func bindingSites(f *ast.File, fn *ast.FuncDecl) []bindingSite {
	rbac := importName(f, "k8s.io/api/rbac/v1")
	var out []bindingSite
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			sel, ok := n.Type.(*ast.SelectorExpr)
			if !ok || rbac == "" || !isIdent(sel.X, rbac) || sel.Sel.Name != "RoleBinding" && sel.Sel.Name != "ClusterRoleBinding" {
				return true
			}
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok && (isIdent(kv.Key, "Subjects") || isIdent(kv.Key, "RoleRef")) {
					out = append(out, bindingSite{n.Pos(), "makes a " + sel.Sel.Name})
					break
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains([]string{"Create", "Update", "Apply", "Patch"}, sel.Sel.Name) {
				return true
			}
			if through := bindingChain(sel.X); through != "" {
				out = append(out, bindingSite{n.Pos(), "calls " + through + "(…)." + sel.Sel.Name})
				return false
			}
		}
		return true
	})
	return out
}

// bindingChain is "RoleBindings" or "ClusterRoleBindings" when x is a chain
// of calls and selectors through one of them, else "".
func bindingChain(x ast.Expr) string {
	for {
		switch e := x.(type) {
		case *ast.CallExpr:
			if sel, ok := e.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "RoleBindings" || sel.Sel.Name == "ClusterRoleBindings") {
				return sel.Sel.Name
			}
			x = e.Fun
		case *ast.SelectorExpr:
			x = e.X
		default:
			return ""
		}
	}
}

// optedOut reports whether fn (its doc comment or body) has a comment
// "rbac: <reason>".
func optedOut(f *ast.File, fn *ast.FuncDecl) bool {
	from := fn.Pos()
	if fn.Doc != nil {
		from = fn.Doc.Pos()
	}
	for _, g := range f.Comments {
		if g.End() < from || g.Pos() > fn.End() {
			continue
		}
		for _, c := range g.List {
			text := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c.Text, "//"), "/*"))
			if reason, ok := strings.CutPrefix(text, "rbac:"); ok && strings.TrimSpace(reason) != "" {
				return true
			}
		}
	}
	return false
}

// waiters are the names of the functions and methods of files that wait
// for RBAC's cache: seeds, and those that call, directly or through each
// other, one of them or a function of quotatest named in ours.
func waiters(files []*ast.File, ours map[string]bool, seeds []string) map[string]bool {
	w := map[string]bool{}
	for _, s := range seeds {
		w[s] = true
	}
	for changed := true; changed; {
		changed = false
		for _, f := range files {
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil || w[fn.Name.Name] {
					continue
				}
				if len(waitCalls(f, fn, ours, w, ours == nil)) > 0 {
					w[fn.Name.Name] = true
					changed = true
				}
			}
		}
	}
	return w
}

// waitCalls are the positions of the calls in fn of a waiter: of quotatest
// (ours, called through its import; by name within quotatest itself, when
// inQuotatest) or of fn's own package (local, by name or as a method).
func waitCalls(f *ast.File, fn *ast.FuncDecl, ours, local map[string]bool, inQuotatest bool) []token.Pos {
	qt := importName(f, quotatestPath)
	imports := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		imports[importName(f, p)] = true
	}
	var out []token.Pos
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		switch fun := call.Fun.(type) {
		case *ast.Ident:
			if local[fun.Name] || inQuotatest && ours[fun.Name] {
				out = append(out, call.Pos())
			}
		case *ast.SelectorExpr:
			x, isIdentX := fun.X.(*ast.Ident)
			switch {
			case isIdentX && qt != "" && x.Name == qt:
				if ours[fun.Sel.Name] {
					out = append(out, call.Pos())
				}
			case isIdentX && imports[x.Name]:
				// Another package's function.
			case local[fun.Sel.Name] || ours[fun.Sel.Name]:
				out = append(out, call.Pos()) // a method that waits
			}
		}
		return true
	})
	return out
}

// importName is the name f imports path as, or "".
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != path {
			continue
		}
		if imp.Name != nil {
			return imp.Name.Name
		}
		return p[strings.LastIndex(p, "/")+1:]
	}
	return ""
}

func isIdent(x ast.Expr, name string) bool {
	id, ok := x.(*ast.Ident)
	return ok && id.Name == name
}

// TestTheBindingCheckFindsWhatItShould: the check on small sources — each
// case's number of findings is its want.
func TestTheBindingCheckFindsWhatItShould(t *testing.T) {
	const ourSrc = `package quotatest
func WaitAllowed() {}
func WaitBound() { WaitAllowed() }
func ServiceAccountToken() { WaitBound() }
func NewClient() {}
`
	const header = `package x
import (
	rbac "k8s.io/api/rbac/v1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)
`
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"a typed create, no wait", `func TestA(t *testing.T) {
	kube.RbacV1().RoleBindings(ns).Create(ctx, b, metav1.CreateOptions{})
	act()
}`, 1},
		{"a literal given to a generic create, then WaitAllowed", `func TestA(t *testing.T) {
	c.Create(ctx, &rbac.RoleBinding{Subjects: s, RoleRef: r})
	quotatest.WaitAllowed(t, kubes, "u", nil, attrs)
}`, 0},
		{"a literal on a typed create, one site", `func TestA(t *testing.T) {
	kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbac.ClusterRoleBinding{RoleRef: r}, opts)
}`, 1},
		{"the wait before the binding", `func TestA(t *testing.T) {
	quotatest.WaitBound(t, kube, "u", nil, "r", "")
	c.Create(ctx, &rbac.ClusterRoleBinding{Subjects: s})
}`, 1},
		{"an Apply, no wait", `func TestA(t *testing.T) {
	kube.RbacV1().ClusterRoleBindings().Apply(ctx, cfg, opts)
}`, 1},
		{"a local helper that waits, as a method", `func (w *world) settle() { quotatest.WaitBound(w.t, w.kube, "u", nil, "r", "") }
func (w *world) bind() {
	w.create(&rbac.RoleBinding{Subjects: s})
	w.settle()
}`, 0},
		{"a quotatest function that waits", `func TestA(t *testing.T) {
	c.Create(ctx, &rbac.RoleBinding{Subjects: s})
	quotatest.ServiceAccountToken(t, cfg, "ns", "n", "r", "ns")
}`, 0},
		{"a quotatest function that does not wait", `func TestA(t *testing.T) {
	c.Create(ctx, &rbac.RoleBinding{Subjects: s})
	quotatest.NewClient(t, cfg)
}`, 1},
		{"an opt-out with a reason", `func TestA(t *testing.T) {
	// rbac: a plane's RBAC reads its bindings live.
	c.Create(ctx, &rbac.RoleBinding{Subjects: s})
}`, 0},
		{"an opt-out without a reason", `func TestA(t *testing.T) {
	// rbac:
	c.Create(ctx, &rbac.RoleBinding{Subjects: s})
}`, 1},
		{"a key to read, no binding", `func TestA(t *testing.T) {
	c.Get(ctx, client.ObjectKeyFromObject(&rbac.RoleBinding{ObjectMeta: m}), rb)
	kube.RbacV1().RoleBindings(ns).Delete(ctx, "n", opts)
}`, 0},
		{"a binding in a closure, the wait after it", `func TestA(t *testing.T) {
	bind := func() { c.Create(ctx, &rbac.RoleBinding{Subjects: s}) }
	bind()
	quotatest.WaitAllowed(t, kubes, "u", nil, attrs)
}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			our, err := parser.ParseFile(fset, "quotatest.go", ourSrc, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(fset, "x_test.go", header+tc.src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			found, _ := unwaitedBindings(fset, map[string][]*ast.File{"q": {our}, "x": {f}}, "q")
			if len(found) != tc.want {
				t.Errorf("found %d, want %d: %q", len(found), tc.want, found)
			}
		})
	}
}
