package engine_test

import (
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/tools/go/packages"
)

// TestNoPackageLevelMutableState: the engine's packages and the quota
// arithmetic keep no process-wide mutable state; everything a replica owns is
// reachable from the value that runs it (docs/architecture.md). A
// package-level variable is allowed only when nothing ever changes it after
// its declaration (a read-only table), or when it is a sentinel error, a
// compiled regexp, or a Prometheus collector (a process serves one /metrics).
func TestNoPackageLevelMutableState(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the packages' type information (about 10 s)")
	}
	found := mutableGlobals(t, "github.com/quotaplane/quotaplane/internal/engine/...", "github.com/quotaplane/quotaplane/internal/quota/...")
	if len(found) > 0 {
		t.Errorf("package-level mutable state (move it into the value that runs the replica):\n%s", strings.Join(found, "\n"))
	}
}

// TestTheCheckFindsMutableState: the check refuses each kind of mutable
// global, and lets a read-only table be.
func TestTheCheckFindsMutableState(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the packages' type information")
	}
	var names []string
	for _, f := range mutableGlobals(t, "./testdata/mutableglobals") {
		names = append(names, strings.Fields(f)[1])
	}
	slices.Sort(names)
	want := []string{"cache", "counter", "pointed", "recorded", "switches", "table"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("mutable globals found (-want +got):\n%s", diff)
	}
}

// mutableGlobals lists "file:line name why" for each package-level variable
// of the packages matching patterns that holds mutable state.
func mutableGlobals(t *testing.T, patterns ...string) []string {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatalf("no packages match %v", patterns)
	}
	var out []string
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("loading %s: %v", p.PkgPath, p.Errors)
		}
		written := writtenVars(p)
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			v, ok := scope.Lookup(name).(*types.Var)
			if !ok || name == "_" {
				continue
			}
			why := ""
			switch {
			case allowedType(v.Type()):
				continue
			case mutableType(v.Type()):
				why = "its type " + v.Type().String() + " is mutable by its methods"
			case written[v] != "":
				why = "written at " + written[v]
			default:
				continue
			}
			out = append(out, p.Fset.Position(v.Pos()).String()+" "+name+" "+why)
		}
	}
	return out
}

// allowedType: sentinel errors, compiled regexps and metrics collectors.
func allowedType(t types.Type) bool {
	if types.Identical(t, types.Universe.Lookup("error").Type()) {
		return true
	}
	if p, ok := t.(*types.Pointer); ok {
		if n, ok := p.Elem().(*types.Named); ok && n.Obj().Pkg() != nil {
			path := n.Obj().Pkg().Path()
			return (path == "regexp" && n.Obj().Name() == "Regexp") || path == "k8s.io/component-base/metrics"
		}
	}
	return false
}

// mutableType: channels and the types of sync and sync/atomic, which change
// through their methods without an assignment.
func mutableType(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if _, ok := t.Underlying().(*types.Chan); ok {
		return true
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		path := n.Obj().Pkg().Path()
		return path == "sync" || path == "sync/atomic"
	}
	return false
}

// writtenVars finds the package-level variables assigned, incremented,
// ranged into, or whose address is taken (or element or field written)
// anywhere in the package after their declaration.
func writtenVars(p *packages.Package) map[*types.Var]string {
	out := map[*types.Var]string{}
	pkgVar := func(e ast.Expr) *types.Var {
		for {
			switch x := e.(type) {
			case *ast.ParenExpr:
				e = x.X
			case *ast.IndexExpr:
				e = x.X
			case *ast.SelectorExpr:
				e = x.X
			case *ast.StarExpr:
				e = x.X
			case *ast.Ident:
				v, ok := p.TypesInfo.Uses[x].(*types.Var)
				if ok && v.Parent() == p.Types.Scope() {
					return v
				}
				return nil
			default:
				return nil
			}
		}
	}
	mark := func(e ast.Expr, at token.Pos) {
		if v := pkgVar(e); v != nil && out[v] == "" {
			out[v] = p.Fset.Position(at).String()
		}
	}
	for _, f := range p.Syntax {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GenDecl:
				if x.Tok == token.VAR {
					// Package-level declarations initialize; only their
					// initializer expressions are looked into.
					for _, s := range x.Specs {
						for _, val := range s.(*ast.ValueSpec).Values {
							ast.Inspect(val, func(n ast.Node) bool { return true })
						}
					}
				}
			case *ast.AssignStmt:
				for _, l := range x.Lhs {
					mark(l, x.Pos())
				}
			case *ast.IncDecStmt:
				mark(x.X, x.Pos())
			case *ast.RangeStmt:
				if x.Tok == token.ASSIGN {
					if x.Key != nil {
						mark(x.Key, x.Pos())
					}
					if x.Value != nil {
						mark(x.Value, x.Pos())
					}
				}
			case *ast.UnaryExpr:
				if x.Op == token.AND {
					mark(x.X, x.Pos())
				}
			case *ast.CallExpr:
				// A method with a pointer receiver called on a variable
				// may change it.
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
					if s, ok := p.TypesInfo.Selections[sel]; ok && s.Kind() == types.MethodVal {
						if sig, ok := s.Obj().Type().(*types.Signature); ok && sig.Recv() != nil {
							if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
								if _, isPtr := s.Recv().(*types.Pointer); !isPtr {
									mark(sel.X, x.Pos())
								}
							}
						}
					}
				}
			}
			return true
		})
	}
	return out
}
