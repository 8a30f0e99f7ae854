package cache

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestTheCollectorIsHeldOnlyUnderALimit: without a memory limit a rebuild
// leaves the collector alone; under one it holds it and gives it back.
func TestTheCollectorIsHeldOnlyUnderALimit(t *testing.T) {
	limit := debug.SetMemoryLimit(math.MaxInt64)
	gc := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(gc)
	})
	release := HoldCollector()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("without a memory limit GOGC became %d; want it left at 100", got)
	}
	release()

	debug.SetMemoryLimit(8 << 30)
	release = HoldCollector()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("under a memory limit GOGC is %d during the rebuild; want -1 (held)", got)
	}
	release()
	release()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after the rebuild GOGC is %d; want 100 again", got)
	}
}
