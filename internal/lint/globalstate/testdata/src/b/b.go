// Package b changes package a's variables from outside.
package b

import "a"

func Elsewhere() {
	a.Table["c"] = 3     // want `package-level variable a.Table: assigned`
	delete(a.Table, "a") // want `package-level variable a.Table: delete changes it`
	a.ErrGone = nil      // want `package-level variable a.ErrGone: assigned`
	_ = a.Table["a"]     // a read
}

func init() {
	a.Table["d"] = 4 // want `package-level variable a.Table: assigned`
}
