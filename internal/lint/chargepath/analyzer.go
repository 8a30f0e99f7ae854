package chargepath

import (
	"go/ast"
	"go/types"
	"strconv"
	"strings"

	"golang.org/x/tools/go/analysis"
)

const module = "github.com/quotaplane/quotaplane/"

const (
	chargePkg = module + "internal/charge"
	authzPkg  = module + "internal/admission/claimauthz"
	renderPkg = module + "internal/policy/claims"
	routePkg  = module + "internal/engine/route"
	admitPkg  = module + "internal/engine/admit"
	peerPkg   = module + "internal/peer"
)

// entryPoints are route.Handle's methods that decide a charge or a review.
func entryPoints() map[string]bool {
	return map[string]bool{"DecideCreate": true, "DecideUpdate": true, "Review": true}
}

// Analyzer is the charging path's boundary check.
func Analyzer() *analysis.Analyzer {
	return &analysis.Analyzer{
		Name: "chargepath",
		Doc:  "only internal/charge authorizes consumers, renders claims and asks the engine to decide a charge or a review",
		Run:  run,
	}
}

func run(pass *analysis.Pass) (any, error) {
	path := pass.Pkg.Path()
	charging := path == chargePkg || strings.HasPrefix(path, chargePkg+"/")
	routing := charging || path == peerPkg || strings.HasPrefix(path, peerPkg+"/")
	for _, f := range pass.Files {
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			switch {
			case err != nil:
			case p == authzPkg && !charging && path != authzPkg:
				pass.Reportf(imp.Pos(), "%s imports claimauthz: authorize consumers through internal/charge, the one charging path", path)
			case p == renderPkg && !charging:
				pass.Reportf(imp.Pos(), "%s imports the claim renderer policy/claims: render through internal/charge (RenderClaim), the one charging path", path)
			case p == admitPkg && routing:
				pass.Reportf(imp.Pos(), "%s imports the local-decision package internal/engine/admit: ask through internal/engine/route, which takes a decision where it is made", path)
			}
		}
	}
	if charging || path == routePkg || path == peerPkg {
		return nil, nil
	}
	points := entryPoints()
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !points[sel.Sel.Name] {
				return true
			}
			fn, ok := pass.TypesInfo.Uses[sel.Sel].(*types.Func)
			if !ok || !isHandleMethod(fn) {
				return true
			}
			pass.Reportf(sel.Sel.Pos(), "%s calls route.Handle.%s: ask the engine through internal/charge, the one charging path", path, sel.Sel.Name)
			return true
		})
	}
	return nil, nil
}

// isHandleMethod reports whether fn is a method of route.Handle.
func isHandleMethod(fn *types.Func) bool {
	sig, ok := fn.Type().(*types.Signature)
	if !ok || sig.Recv() == nil {
		return false
	}
	t := sig.Recv().Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok {
		return false
	}
	obj := named.Obj()
	return obj.Name() == "Handle" && obj.Pkg() != nil && obj.Pkg().Path() == routePkg
}
