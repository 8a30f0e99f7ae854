package layout

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the repository's root, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestEveryPackageHasADocGo: every package states its contract in a doc.go.
func TestEveryPackageHasADocGo(t *testing.T) {
	r := root(t)
	var missing []string
	for _, top := range []string{"api", "cmd", "config", "internal", "test"} {
		for dir := range packageTokens(t, filepath.Join(r, top)) {
			if _, err := os.Stat(filepath.Join(dir, "doc.go")); err != nil {
				rel, _ := filepath.Rel(r, dir)
				missing = append(missing, rel)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("packages without a doc.go stating their contract:\n%s", strings.Join(missing, "\n"))
	}
}
