// Package layout checks the shape of the module a newcomer relies on
// (docs/architecture.md, "Rules the code keeps"): the size rule (no package
// over 10,000 code tokens, no file over 4,500, comments not counted), no
// package-level mutable state (the globalstate analyzer over every package),
// a doc.go in every package, and no test hook in the files the shipped
// binary is built from (docs/security.md). It has no code of its own, only
// tests.
package layout
