package chargepath_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/quotaplane/quotaplane/internal/lint/chargepath"
)

// TestTheAnalyzerFindsEachPattern: testdata holds the charging package,
// claimauthz, route and admit as they may use the steps; peer and a
// package of the charging component importing the local-decision package
// (and peer, claimauthz); and a package elsewhere that assembles the steps
// itself: an import of claimauthz, a call and a method value of each entry
// point; a package elsewhere importing the claim renderer. A Review of another type or package is none of them. Each `// want` comment is a diagnostic the
// analyzer must report, and it must report nothing else.
func TestTheAnalyzerFindsEachPattern(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), chargepath.Analyzer(),
		"github.com/quotaplane/quotaplane/internal/charge",
		"github.com/quotaplane/quotaplane/internal/admission/claimauthz",
		"github.com/quotaplane/quotaplane/internal/charge/inforce",
		"github.com/quotaplane/quotaplane/internal/engine/route",
		"github.com/quotaplane/quotaplane/internal/engine/admit",
		"github.com/quotaplane/quotaplane/internal/peer",
		"github.com/quotaplane/quotaplane/internal/server/elsewhere",
		"github.com/quotaplane/quotaplane/internal/engine/existing",
		"github.com/quotaplane/quotaplane/internal/policy/claims",
		"github.com/quotaplane/quotaplane/internal/server/whatif")
}
