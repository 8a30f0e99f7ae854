// Package mutableglobals is a package the global-state check must refuse:
// each variable below is process-wide mutable state.
package mutableglobals

import (
	"sync"
	"sync/atomic"
)

var (
	counter  int
	cache    = map[string]int{}
	switches atomic.Bool
	recorded sync.Map
	table    = []string{"a", "b"}
	pointed  = 1
	readOnly = []string{"fine"} // never written: a read-only table
)

// Touch writes every variable but readOnly.
func Touch() int {
	counter++
	cache["x"] = 1
	switches.Store(true)
	recorded.Store("k", "v")
	table[0] = "c"
	p := &pointed
	*p = 2
	return len(readOnly)
}
