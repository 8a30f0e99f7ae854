package globalstate_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/quotaplane/quotaplane/internal/lint/globalstate"
)

// TestTheAnalyzerFindsEachPattern: testdata/src/a declares every kind of
// package-level variable the rule allows and refuses, and changes them in
// every way it knows (assignment, element and field writes, ++, delete,
// clear, a mutating method, a function that writes a table passed to it,
// an address taken, an alias, append, range into, a table returned);
// testdata/src/b changes them from another package, even in its own init.
// Each `// want` comment is a diagnostic the analyzer must report, and it
// must report nothing else.
func TestTheAnalyzerFindsEachPattern(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), globalstate.Analyzer(), "a", "b")
}
