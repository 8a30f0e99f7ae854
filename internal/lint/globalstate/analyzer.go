package globalstate

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// Analyzer returns the analyzer: it reports package-level variables that
// hold mutable state, and every change to a package-level variable after
// its declaration. (A function, not the usual variable: the rule holds for
// its own package too.)
func Analyzer() *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:     "globalstate",
		Doc:      "reports package-level mutable state: variables of mutable types, and writes to package-level variables (docs/architecture.md)",
		Requires: []*analysis.Analyzer{inspect.Analyzer},
		Run:      run,
	}
}

func run(pass *analysis.Pass) (any, error) {
	checkDeclarations(pass)
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ins.WithStack([]ast.Node{(*ast.Ident)(nil)}, func(n ast.Node, push bool, stack []ast.Node) bool {
		if push && !isTestFile(pass, stack[0].(*ast.File)) {
			checkUse(pass, n.(*ast.Ident), stack)
		}
		return true
	})
	return nil, nil
}

// checkDeclarations refuses package-level variables of mutable types.
func checkDeclarations(pass *analysis.Pass) {
	for _, f := range pass.Files {
		if isTestFile(pass, f) {
			continue
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				for _, name := range s.(*ast.ValueSpec).Names {
					if name.Name == "_" {
						continue
					}
					v, ok := pass.TypesInfo.Defs[name].(*types.Var)
					if !ok {
						continue
					}
					if why := refusedType(v.Type()); why != "" {
						pass.Reportf(name.Pos(), "package-level variable %s holds mutable state: %s; move it into the value that uses it", name.Name, why)
					}
				}
			}
		}
	}
}

// packageVar is the package-level variable id names, or nil.
func packageVar(pass *analysis.Pass, id *ast.Ident) *types.Var {
	v, ok := pass.TypesInfo.Uses[id].(*types.Var)
	if !ok || v.Pkg() == nil || v.Name() == "_" || v.Parent() != v.Pkg().Scope() {
		return nil
	}
	return v
}

// checkUse reports a use of a package-level variable that may change it.
func checkUse(pass *analysis.Pass, id *ast.Ident, stack []ast.Node) {
	v := packageVar(pass, id)
	if v == nil || inInit(pass, v, stack) || inOwnDeclaration(pass, v, stack) {
		return
	}
	// e is the expression the use reaches: the variable, an element or a
	// field of it, or a reslice of it.
	i := len(stack) - 1
	var e ast.Expr = id
	if sel, ok := stack[i-1].(*ast.SelectorExpr); ok && sel.Sel == id {
		e, i = sel, i-1 // pkg.Var
	}
	for ; i > 0; i-- {
		next, ok := climb(pass, stack[i-1], e)
		if !ok {
			break
		}
		e = next
	}
	parent := stack[i-1]
	if !sameModule(v.Pkg().Path(), pass.Pkg.Path()) && !directWrite(e, parent) {
		// Another module's variable (os.Stdout, a library's default):
		// only a direct change of it is this module's doing.
		return
	}
	name := v.Name()
	if v.Pkg() != pass.Pkg {
		name = v.Pkg().Name() + "." + name
	}
	if why := change(pass, v, e, parent, stack[:i]); why != "" {
		pass.Reportf(e.Pos(), "package-level variable %s: %s; package-level state must not change after its declaration (docs/architecture.md)", name, why)
	}
}

// climb returns parent when it reaches further into e: an element, a field,
// a dereference, a reslice or a parenthesis.
func climb(pass *analysis.Pass, parent ast.Node, e ast.Expr) (ast.Expr, bool) {
	switch p := parent.(type) {
	case *ast.ParenExpr:
		return p, true
	case *ast.IndexExpr:
		if p.X == e {
			if _, generic := pass.TypesInfo.TypeOf(p.X).(*types.Signature); !generic {
				return p, true
			}
		}
	case *ast.SliceExpr:
		return p, p.X == e
	case *ast.StarExpr:
		return p, true
	case *ast.TypeAssertExpr:
		return p, p.X == e
	case *ast.SelectorExpr:
		if sel, ok := pass.TypesInfo.Selections[p]; ok && sel.Kind() == types.FieldVal && p.X == e {
			return p, true
		}
	}
	return nil, false
}

// change says how the use e (its parent given, stack above it) may change
// the variable v, or "".
func change(pass *analysis.Pass, v *types.Var, e ast.Expr, parent ast.Node, stack []ast.Node) string {
	t := pass.TypesInfo.TypeOf(e)
	escapes := func(how string) string {
		if t == nil || !hasReference(t) || isSafe(t) {
			return ""
		}
		return how + " shares it with code that can change it"
	}
	switch p := parent.(type) {
	case *ast.AssignStmt:
		for _, l := range p.Lhs {
			if l == e {
				return "assigned"
			}
		}
		return escapes("assigning it to another variable")
	case *ast.IncDecStmt:
		return "incremented or decremented"
	case *ast.RangeStmt:
		if p.X == e {
			return ""
		}
		if p.Tok == token.ASSIGN {
			return "ranged into"
		}
	case *ast.UnaryExpr:
		if p.Op == token.AND {
			return "its address is taken"
		}
	case *ast.SelectorExpr:
		return methodChange(pass, v, e, p)
	case *ast.CallExpr:
		if p.Fun == e {
			return ""
		}
		return argumentChange(pass, v, e, t, p)
	case *ast.KeyValueExpr:
		if p.Key == e {
			return ""
		}
		return escapes("storing it in a composite literal")
	case *ast.CompositeLit:
		return escapes("storing it in a composite literal")
	case *ast.ReturnStmt:
		return escapes("returning it")
	case *ast.SendStmt:
		return escapes("sending it")
	case *ast.ValueSpec:
		return escapes("declaring another variable with it")
	}
	return ""
}

// methodChange: a method called on the variable (or a part of it) changes
// it when it has a pointer receiver, or when the variable is a table or a
// pointer and the method is not a known reader.
func methodChange(pass *analysis.Pass, v *types.Var, e ast.Expr, sel *ast.SelectorExpr) string {
	s, ok := pass.TypesInfo.Selections[sel]
	if !ok || (s.Kind() != types.MethodVal && s.Kind() != types.MethodExpr) {
		return ""
	}
	method := sel.Sel.Name
	t := pass.TypesInfo.TypeOf(e)
	if isSafe(t) {
		if schemeMethodWrites(t, method) {
			return "its method " + method + " fills it outside init"
		}
		return ""
	}
	sig := s.Obj().Type().(*types.Signature)
	if _, ptrRecv := sig.Recv().Type().(*types.Pointer); ptrRecv {
		return "its method " + method + " has a pointer receiver and may change it"
	}
	switch t.Underlying().(type) {
	case *types.Map, *types.Slice, *types.Pointer:
		if !readOnlyMethods[method] {
			return "its method " + method + " may change it"
		}
	}
	return ""
}

// argumentChange: passing a reference to the variable to a function that
// is not a known reader.
func argumentChange(pass *analysis.Pass, v *types.Var, e ast.Expr, t types.Type, call *ast.CallExpr) string {
	if tv, ok := pass.TypesInfo.Types[call.Fun]; ok && tv.IsType() {
		if b, ok := tv.Type.Underlying().(*types.Basic); ok && b.Info()&types.IsString != 0 {
			return "" // string(b) copies
		}
		if t != nil && hasReference(t) && !isSafe(t) {
			return "converting it shares it with code that can change it"
		}
		return ""
	}
	if b, ok := calleeObject(pass, call).(*types.Builtin); ok {
		switch b.Name() {
		case "delete":
			return "delete changes it"
		case "clear":
			return "clear changes it"
		case "append":
			if call.Args[0] == e {
				return "appending to it may write its backing array"
			}
			return ""
		case "copy":
			if call.Args[0] == e {
				return "copy writes into it"
			}
		}
		return ""
	}
	if t == nil || (!hasReference(t) && call.Ellipsis == token.NoPos) {
		return "" // passed by value
	}
	fn, _ := calleeObject(pass, call).(*types.Func)
	if isSafe(t) {
		if isScheme(t) && fn != nil && schemeFiller(fn.Name()) {
			return "passing it to " + fn.Name() + " fills it outside init"
		}
		return ""
	}
	if fn != nil && fn.Pkg() != nil {
		if readOnlyFuncs[fn.Pkg().Path()+"."+fn.Name()] || readOnlyPackages[fn.Pkg().Path()] {
			return ""
		}
		return "passing it to " + fn.Name() + ", which may change it"
	}
	return "passing it to a function value, which may change it"
}

// calleeObject is the function or builtin a call calls, or nil.
func calleeObject(pass *analysis.Pass, call *ast.CallExpr) types.Object {
	fun := ast.Unparen(call.Fun)
	if ix, ok := fun.(*ast.IndexExpr); ok {
		fun = ix.X // an explicit instantiation
	}
	if ix, ok := fun.(*ast.IndexListExpr); ok {
		fun = ix.X
	}
	switch f := fun.(type) {
	case *ast.Ident:
		return pass.TypesInfo.Uses[f]
	case *ast.SelectorExpr:
		return pass.TypesInfo.Uses[f.Sel]
	}
	return nil
}

func isScheme(t types.Type) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	pkg, name := typeKey(t)
	return pkg == "k8s.io/apimachinery/pkg/runtime" && (name == "Scheme" || name == "SchemeBuilder")
}

// schemeMethodWrites: a Scheme's Add*, Set* and Register* methods, and a
// SchemeBuilder's Register, fill it.
func schemeMethodWrites(t types.Type, method string) bool {
	if !isScheme(t) {
		return false
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	if _, name := typeKey(t); name == "SchemeBuilder" {
		return method == "Register"
	}
	for _, prefix := range schemeWriters {
		if strings.HasPrefix(method, prefix) {
			return true
		}
	}
	return false
}

// schemeFiller: functions given a Scheme to fill (AddToScheme, Install,
// Register...).
func schemeFiller(name string) bool {
	return strings.Contains(name, "ToScheme") || strings.HasPrefix(name, "Install") ||
		strings.HasPrefix(name, "Register") || strings.HasPrefix(name, "Add")
}

// inInit: the declaring package's init functions fill its variables.
func inInit(pass *analysis.Pass, v *types.Var, stack []ast.Node) bool {
	if v.Pkg() != pass.Pkg {
		return false
	}
	for _, n := range stack {
		if fd, ok := n.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
			return true
		}
	}
	return false
}

// inOwnDeclaration: the variable's own initializer (and its name there).
func inOwnDeclaration(pass *analysis.Pass, v *types.Var, stack []ast.Node) bool {
	for _, n := range stack {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			continue
		}
		for _, name := range vs.Names {
			if pass.TypesInfo.Defs[name] == v {
				return true
			}
		}
	}
	return false
}

// isTestFile: tests may keep fixtures in package-level variables (a
// TestMain's server); the rule is about the code that ships.
// isTestFile reports whether f is not checked: a test, or a file a
// generator wrote (ast.IsGenerated: "Code generated … DO NOT EDIT.") — the
// typed clients' scheme registries and codecs follow client-go's
// conventions, filled in their initializers and never changed by
// quotaplane's code, whose own uses of them are still checked.
func isTestFile(pass *analysis.Pass, f *ast.File) bool {
	return strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go") || ast.IsGenerated(f)
}

// sameModule reports whether two import paths share a module root: the
// first three elements of a path whose first element is a domain
// (github.com/org/repo), else the first element.
func sameModule(a, b string) bool {
	root := func(p string) string {
		parts := strings.Split(p, "/")
		n := 1
		if strings.Contains(parts[0], ".") {
			n = min(3, len(parts))
		}
		return strings.Join(parts[:n], "/")
	}
	return root(a) == root(b)
}

// directWrite: e is assigned, incremented, ranged into, deleted from,
// cleared or has its address taken.
func directWrite(e ast.Expr, parent ast.Node) bool {
	switch p := parent.(type) {
	case *ast.AssignStmt:
		for _, l := range p.Lhs {
			if l == e {
				return true
			}
		}
	case *ast.IncDecStmt:
		return true
	case *ast.RangeStmt:
		return p.X != e && p.Tok == token.ASSIGN
	case *ast.UnaryExpr:
		return p.Op == token.AND
	case *ast.CallExpr:
		if id, ok := ast.Unparen(p.Fun).(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(p.Args) > 0 && p.Args[0] == e {
			return true
		}
	}
	return false
}
