package cache

import (
	"maps"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// windowState is what the cache knows of one windowed grant's phase.
type windowState struct {
	window quota.Window
	// recorded is the latest phase recorded in the ledger for window (by
	// this term or an earlier one); onGrant the one its status shows.
	recorded, onGrant quota.Phase
}

func (s *windowState) honoured() quota.Phase { return s.window.Honoured(s.recorded, s.onGrant) }

// RestoreWindows holds the grant window phases earlier leaders recorded in
// the ledger: they are honoured, whatever this leader's clock says, from
// the moment their grants are seen. Call it before any grant is seen.
func (c *Cache) RestoreWindows(records map[string]formats.WindowRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, r := range records {
		c.windowRecords[uid] = r
	}
}

// phaseOfLocked is the phase a windowed grant is honoured in, from what the
// ledger and the grant's own status record; grants without a window are
// forgotten here. The lock is held.
func (c *Cache) phaseOfLocked(g *quotav1alpha1.ResourceGrant, w quota.Window) quota.Phase {
	uid := string(g.UID)
	if !w.Bounded() {
		c.forgetWindowLocked(uid)
		return quota.PhaseUnknown
	}
	st := c.windows[uid]
	if st == nil || !st.window.Equal(w) {
		st = &windowState{window: w}
		c.windows[uid] = st
	}
	st.onGrant = convert.RecordedPhase(g)
	if _, writing := c.windowsDue[uid]; writing {
		// Its record is being written to the ledger: it counts once that
		// succeeded (ApplyWindows), not before.
		c.windowCheck = time.Time{}
		return st.honoured()
	}
	if r, ok := c.windowRecords[uid]; ok {
		rw := quota.Window{From: r.From, Until: r.Until}
		switch {
		case !rw.Equal(w):
			// Recorded for a window the grant no longer has.
			delete(c.windowRecords, uid)
			c.ledgerStale = true
		default:
			st.recorded = max(st.recorded, quota.ParsePhase(r.Phase))
			if st.onGrant >= st.recorded {
				// The grant shows it: its status is the record now.
				delete(c.windowRecords, uid)
				c.ledgerStale = true
			}
		}
	}
	c.windowCheck = time.Time{} // look again at the next WindowsDue
	return st.honoured()
}

func (c *Cache) forgetWindowLocked(uid string) {
	delete(c.windows, uid)
	if _, ok := c.windowRecords[uid]; ok {
		delete(c.windowRecords, uid)
		c.ledgerStale = true
	}
}

// WindowsCurrentLocked reports whether the phases the books count are the
// ones the clock (now) puts every windowed grant in, as far as they may
// count: false when a window may have started or ended since the last
// WindowsDue, or a phase it found is still being recorded. Admission decides
// only when it is true (it asks the decide loop, which runs WindowsDue first,
// and waits): a grant never counts past its window's end, however long
// until the next round. It costs one comparison while nothing is due. The
// lock is held.
func (c *Cache) WindowsCurrentLocked(now time.Time) bool {
	switch {
	case len(c.windowsDue) > 0:
		return false
	case c.windowCheck.IsZero():
		return len(c.windows) == 0
	}
	return now.Before(c.windowCheck)
}

// WindowsDue records, in the state the next ledger record holds, every
// phase the clock (now) has moved a windowed grant to and no leader has
// recorded yet. It reports whether there is any: the caller then records the
// ledger and, once that succeeded, calls ApplyWindows. Until then the
// grants keep the phase they had: no claim is decided against a limit a
// window changed before the change is durable.
func (c *Cache) WindowsDue(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.windowCheck.IsZero() && now.Before(c.windowCheck) {
		return false
	}
	var next time.Time
	due := false
	for uid, st := range c.windows {
		h := st.honoured()
		if p, ok := st.window.Due(h, now); ok {
			c.windowRecords[uid] = formats.WindowRecord{Phase: p.String(), From: st.window.From, Until: st.window.Until}
			c.windowsDue[uid] = p
			due = true
			h = p
		}
		if t, ok := st.window.Next(h); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if next.IsZero() {
		next = now.Add(time.Hour)
	}
	c.windowCheck = next
	return due
}

// ApplyWindows makes the phases WindowsDue recorded count, now that the
// ledger holds them. A grant whose window changed meanwhile keeps its own.
func (c *Cache) ApplyWindows() {
	c.mu.Lock()
	for uid, p := range c.windowsDue {
		delete(c.windowsDue, uid)
		st := c.windows[uid]
		r, ok := c.windowRecords[uid]
		if st == nil || !ok || !st.window.Equal(quota.Window{From: r.From, Until: r.Until}) {
			continue
		}
		st.recorded = max(st.recorded, p)
		if g, ok := c.acc.Grant(uid); ok {
			g.Phase = st.honoured()
			c.acc.UpsertGrant(g)
		}
	}
	c.mu.Unlock()
	c.Notify()
}

// windowRecordsLocked are the window records the next ledger record holds.
func (c *Cache) windowRecordsLocked() map[string]formats.WindowRecord {
	if len(c.windowRecords) == 0 {
		return nil
	}
	return maps.Clone(c.windowRecords)
}
