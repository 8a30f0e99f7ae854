package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	maxPackageLines = 1500
	maxFileLines    = 600
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

// goDirs maps each directory under dir holding Go files (testdata excluded)
// to its non-test, non-generated files and their line counts.
func goDirs(t *testing.T, dir string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		dirFiles := out[filepath.Dir(p)]
		if dirFiles == nil {
			dirFiles = map[string]int{}
			out[filepath.Dir(p)] = dirFiles
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(src, []byte("Code generated")) && bytes.Contains(src, []byte("DO NOT EDIT")) {
			return nil
		}
		dirFiles[filepath.Base(p)] = bytes.Count(src, []byte("\n"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPackageAndFileSizes: no package under internal/ grows past 1,500
// non-test, non-generated lines, and no such file past 600, before it is
// split by concern.
func TestPackageAndFileSizes(t *testing.T) {
	r := root(t)
	var problems []string
	for dir, files := range goDirs(t, filepath.Join(r, "internal")) {
		rel, _ := filepath.Rel(r, dir)
		total := 0
		for name, n := range files {
			total += n
			if n > maxFileLines {
				problems = append(problems, rel+"/"+name+": "+strconv.Itoa(n)+" lines, over "+strconv.Itoa(maxFileLines))
			}
		}
		if total > maxPackageLines {
			problems = append(problems, rel+": "+strconv.Itoa(total)+" lines, over "+strconv.Itoa(maxPackageLines))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Errorf("split these by concern (docs/architecture.md):\n%s", strings.Join(problems, "\n"))
	}
}

// TestEveryPackageHasADocGo: every package states its contract in a doc.go.
func TestEveryPackageHasADocGo(t *testing.T) {
	r := root(t)
	var missing []string
	for _, top := range []string{"api", "cmd", "config", "internal", "test"} {
		for dir, files := range goDirs(t, filepath.Join(r, top)) {
			if len(files) == 0 {
				continue // tests only
			}
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
