package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The size rule (docs/architecture.md): no package of the module holds more
// than maxPackageTokens code tokens in its non-test, non-generated files,
// and no such file more than maxFileTokens. Tokens, not lines: comments do
// not count, so deleting them gains nothing, and neither does folding lines
// (semicolons, inserted at line ends or written, are not counted). About 6.5
// tokens make a line of this module's code, so the limits are the old
// 1,500 and 600 lines of code.
const (
	maxPackageTokens = 10_000
	maxFileTokens    = 4_500
)

// codeTokens counts the tokens of src, comments and semicolons excluded.
func codeTokens(name string, src []byte) (int, error) {
	fset := token.NewFileSet()
	var s scanner.Scanner
	var scanErr error
	s.Init(fset.AddFile(name, -1, len(src)), src, func(pos token.Position, msg string) {
		scanErr = fmt.Errorf("%s: %s", pos, msg)
	}, 0)
	n := 0
	for {
		_, tok, _ := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON {
			continue // a statement separator, inserted at a line's end or written
		}
		n++
	}
	return n, scanErr
}

// generated reports whether src is a generated file by Go's convention
// (go/ast.IsGenerated: the "Code generated … DO NOT EDIT." comment before
// the package clause), not by a mention of those words anywhere.
func generated(name string, src []byte) (bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return false, err
	}
	return ast.IsGenerated(f), nil
}

// packageTokens maps each directory under dir holding non-test,
// non-generated Go files (testdata and hidden directories excluded) to the
// code tokens of each such file.
func packageTokens(t *testing.T, dir string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if gen, err := generated(p, src); err != nil || gen {
			return err
		}
		n, err := codeTokens(p, src)
		if err != nil {
			return err
		}
		if out[filepath.Dir(p)] == nil {
			out[filepath.Dir(p)] = map[string]int{}
		}
		out[filepath.Dir(p)][filepath.Base(p)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// oversized lists the packages and files under dir past the limits.
func oversized(t *testing.T, dir string, maxPackage, maxFile int) []string {
	t.Helper()
	var problems []string
	for pkg, files := range packageTokens(t, dir) {
		rel, _ := filepath.Rel(dir, pkg)
		total := 0
		for name, n := range files {
			total += n
			if n > maxFile {
				problems = append(problems, fmt.Sprintf("%s: %d code tokens, over %d", filepath.Join(rel, name), n, maxFile))
			}
		}
		if total > maxPackage {
			problems = append(problems, fmt.Sprintf("%s: %d code tokens, over %d", rel, total, maxPackage))
		}
	}
	slices.Sort(problems)
	return problems
}

// TestPackageAndFileSizes: every non-test, non-generated Go file of the
// module, api/, cmd/, hack/ and test/ included, keeps the size rule.
func TestPackageAndFileSizes(t *testing.T) {
	if problems := oversized(t, root(t), maxPackageTokens, maxFileTokens); len(problems) > 0 {
		t.Errorf("split these by concern (docs/architecture.md, \"Size\"):\n%s", strings.Join(problems, "\n"))
	}
}

// TestTheSizeRuleCountsCode: a file padded past the limit with code is
// refused; the same code with a thousand comment lines counts the same, and
// one line per statement or all on a few lines count the same; a file that
// merely mentions "Code generated" and "DO NOT EDIT" is counted, and a
// generated one is not.
func TestTheSizeRuleCountsCode(t *testing.T) {
	var code strings.Builder
	code.WriteString("package padded\n\nfunc f() int {\n\tx := 0\n")
	for range 200 {
		code.WriteString("\tx = x + 1\n") // 5 tokens: x = x + 1
	}
	code.WriteString("\treturn x\n}\n")
	src := code.String()
	base, err := codeTokens("padded.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if base < 1000 {
		t.Fatalf("the padded file has %d code tokens; want over 1,000", base)
	}
	commented := strings.Replace(src, "func f()", strings.Repeat("// a comment that is not code\n", 1000)+"/* and a\nblock */ func f()", 1)
	folded := strings.ReplaceAll(src, "\n\tx = x + 1", "; x = x + 1")
	for name, variant := range map[string]string{"comments": commented, "folded": folded} {
		if n, err := codeTokens(name+".go", []byte(variant)); err != nil || n != base {
			t.Errorf("%s: %d code tokens (err %v); want %d, as the plain file", name, n, err, base)
		}
	}

	dir := t.TempDir()
	write := func(pkg, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pkg, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("padded", "padded.go", src)
	write("commented", "commented.go", "// Package commented is small.\npackage commented\n\n"+strings.Repeat("// comment\n", 5000)+"func f() {}\n")
	write("mentions", "mentions.go", "package mentions\n\n// Code generated files say DO NOT EDIT; this one is not generated.\n"+strings.Replace(src, "package padded\n", "", 1))
	write("generated", "zz_generated.go", "// Code generated by a tool. DO NOT EDIT.\n\n"+src)
	write("tested", "x_test.go", src)
	got := oversized(t, dir, base-1, 1_000_000)
	want := []string{fmt.Sprintf("mentions: %d code tokens, over %d", base, base-1), fmt.Sprintf("padded: %d code tokens, over %d", base, base-1)}
	if !slices.Equal(got, want) {
		t.Errorf("packages over a %d-token limit: got %q, want %q", base-1, got, want)
	}
	if got := oversized(t, dir, 1_000_000, base-1); len(got) != 2 || !strings.Contains(got[1], "padded.go") {
		t.Errorf("files over a %d-token limit: got %q, want mentions.go and padded.go", base-1, got)
	}
}
