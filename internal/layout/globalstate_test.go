package layout

import (
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/quotaplane/quotaplane/internal/lint/chargepath"
	"github.com/quotaplane/quotaplane/internal/lint/globalstate"
)

// TestNoPackageLevelMutableState runs the module's analyzers over every
// package of the module, loaded once: globalstate (no package-level
// variable holds mutable state, and none is changed after its declaration,
// from its package or any other) and chargepath (only internal/charge
// authorizes consumers and asks the engine to decide a charge or a review:
// the one charging path). docs/architecture.md says why; each analyzer's
// own tests hold each pattern it refuses (internal/lint/*/testdata).
func TestNoPackageLevelMutableState(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module (about a minute)")
	}
	cfg := &packages.Config{Dir: root(t), Mode: packages.LoadSyntax | packages.NeedModule}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 50 {
		t.Fatalf("loaded %d packages of the module; want them all", len(pkgs))
	}
	var loadErrors []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			loadErrors = append(loadErrors, e.Error())
		}
	})
	if len(loadErrors) > 0 {
		t.Fatalf("loading the module:\n%s", strings.Join(loadErrors, "\n"))
	}
	analyzers := []*analysis.Analyzer{globalstate.Analyzer(), chargepath.Analyzer()}
	graph, err := checker.Analyze(analyzers, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for act := range graph.All() {
		if act.Analyzer != analyzers[0] && act.Analyzer != analyzers[1] {
			continue
		}
		if act.Err != nil {
			t.Errorf("%s: %v", act.Package.PkgPath, act.Err)
		}
		for _, d := range act.Diagnostics {
			found = append(found, act.Package.Fset.Position(d.Pos).String()+": "+d.Message)
		}
	}
	if len(found) > 0 {
		t.Errorf("package-level mutable state, or a step of the charging path taken outside it (%d):\n%s", len(found), strings.Join(found, "\n"))
	}
}
