package server

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"k8s.io/klog/v2"
)

// Idle memory: the Go runtime keeps the heap it grew to (for the load a
// walkthrough or a burst brought) and returns it to the operating system
// only slowly, so an idle server's resident size stays near its peak. When
// serve has allocated almost nothing for a while, it collects once and
// returns the free heap (debug.FreeOSMemory): its resident size falls to
// what it holds live (docs/operations.md, "Memory"). Under load it never
// runs, so it costs no latency; idle, one collection per quiet spell.
const (
	idleCheckEvery = 20 * time.Second
	// idleAllocations is at most what an idle server allocates between
	// two checks (its Leases, the engine's ledger, health checks).
	idleAllocations = 32 << 20
)

// trimWhenIdle returns the free heap to the operating system after each
// spell of load, once allocation falls idle, until ctx is done.
func trimWhenIdle(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return sample[0].Value.Uint64()
	}
	tick := time.NewTicker(idleCheckEvery)
	defer tick.Stop()
	last, trimmed := allocated(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := allocated()
		busy := now-last > idleAllocations
		last = now
		switch {
		case busy:
			trimmed = false
		case !trimmed:
			began := time.Now()
			debug.FreeOSMemory()
			trimmed = true
			last = allocated()
			klog.FromContext(ctx).V(2).Info("Idle: returned the free heap to the operating system", "took", time.Since(began))
		}
	}
}
