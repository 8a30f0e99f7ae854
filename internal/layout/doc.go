// Package layout checks the shape of the repository a newcomer relies on
// (docs/architecture.md): no package under internal/ over 1,500 non-test,
// non-generated lines, no such file over 600, and a doc.go in every package.
// It has no code of its own, only tests.
package layout
