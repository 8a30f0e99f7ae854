package cache

import (
	"math"
	"runtime/debug"
)

// HoldCollector holds the garbage collector back while a term rebuilds its
// state, when the process runs under a memory limit (GOMEMLIMIT): a rebuild
// allocates the whole state at once, and with the default GOGC the
// collector walks the growing heap over and over (a quarter of a million
// claims' rebuild). The limit still bounds the heap: the runtime collects
// as it nears it. Without a limit nothing changes. release restores the
// collector's setting; calling it more than once is harmless.
func HoldCollector() (release func()) {
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		return func() {}
	}
	old := debug.SetGCPercent(-1)
	done := false
	return func() {
		if !done {
			done = true
			debug.SetGCPercent(old)
		}
	}
}
