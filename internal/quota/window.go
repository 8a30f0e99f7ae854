package quota

import (
	"slices"
	"strings"
	"time"
)

// Window is when a grant counts: from From (inclusive) until Until
// (exclusive). A zero bound is open.
type Window struct {
	From, Until time.Time
}

// Equal says whether two windows have the same bounds.
func (w Window) Equal(o Window) bool { return w.From.Equal(o.From) && w.Until.Equal(o.Until) }

// Bounded says whether the window has a bound at all; a grant without one
// counts for as long as it exists, and has no phase.
func (w Window) Bounded() bool { return !w.From.IsZero() || !w.Until.IsZero() }

// Phase is where a grant stands in its window. Phases only move forward for
// one window: PhaseScheduled, then PhaseActive, then PhaseExpired.
type Phase int8

const (
	// PhaseUnknown: nothing recorded.
	PhaseUnknown Phase = iota
	// PhaseScheduled: before the window; the grant does not count.
	PhaseScheduled
	// PhaseActive: inside the window; the grant counts.
	PhaseActive
	// PhaseExpired: after the window; the grant no longer counts.
	PhaseExpired
)

func (p Phase) String() string {
	switch p {
	case PhaseScheduled:
		return "Scheduled"
	case PhaseActive:
		return "Active"
	case PhaseExpired:
		return "Expired"
	}
	return "Unknown"
}

// ParsePhase reads a phase's name; PhaseUnknown for anything else.
func ParsePhase(s string) Phase {
	switch s {
	case "Scheduled":
		return PhaseScheduled
	case "Active":
		return PhaseActive
	case "Expired":
		return PhaseExpired
	}
	return PhaseUnknown
}

// At is the phase a clock reading now puts the window in.
func (w Window) At(now time.Time) Phase {
	switch {
	case !w.Until.IsZero() && !now.Before(w.Until):
		return PhaseExpired
	case !w.From.IsZero() && now.Before(w.From):
		return PhaseScheduled
	}
	return PhaseActive
}

// Initial is the phase a grant is in before anything is recorded for its
// window: counting from its creation when it has no start, else not yet.
// Every later phase must be recorded before it is used.
func (w Window) Initial() Phase {
	if w.From.IsZero() {
		return PhaseActive
	}
	return PhaseScheduled
}

// Honoured is the phase a leader uses for a window: the latest of what was
// recorded (by any leader, in the ledger or on the grant) and the window's
// initial phase, whatever this leader's clock says. The clock only moves a
// grant on by a new record (Due).
func (w Window) Honoured(recorded ...Phase) Phase {
	p := w.Initial()
	for _, r := range recorded {
		p = max(p, r)
	}
	return p
}

// Due is the phase to record now, when the clock has moved the window past
// the phase honoured; false when there is nothing to record.
func (w Window) Due(honoured Phase, now time.Time) (Phase, bool) {
	if !w.Bounded() {
		return PhaseUnknown, false
	}
	if at := w.At(now); at > honoured {
		return at, true
	}
	return PhaseUnknown, false
}

// Next is the next time the clock moves the window to a later phase than
// p; false when there is none.
func (w Window) Next(p Phase) (time.Time, bool) {
	switch {
	case p < PhaseActive && !w.From.IsZero():
		return w.From, true
	case p < PhaseExpired && !w.Until.IsZero():
		return w.Until, true
	}
	return time.Time{}, false
}

// Counts says whether a grant in phase p of window w counts towards its
// buckets.
func (w Window) Counts(p Phase) bool { return !w.Bounded() || p == PhaseActive }

// ExpiringSoon says whether a grant counting in window w is within lead of
// its expiry at now, and when that next changes (zero: never).
func (w Window) ExpiringSoon(p Phase, now time.Time, lead time.Duration) (soon bool, next time.Time) {
	if w.Until.IsZero() || p != PhaseActive || lead <= 0 {
		return false, time.Time{}
	}
	from := w.Until.Add(-lead)
	if now.Before(from) {
		return false, from
	}
	return true, w.Until
}

// ExpiringSoon are the contributions to b that stop counting within lead of
// now, soonest first.
func (b BucketStatus) ExpiringSoon(now time.Time, lead time.Duration) []GrantContribution {
	var out []GrantContribution
	for _, g := range b.Grants {
		if !g.ExpiresAt.IsZero() && lead > 0 && !now.Before(g.ExpiresAt.Add(-lead)) && now.Before(g.ExpiresAt) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b GrantContribution) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// BucketIDs are the buckets a grant's allowances give to, at its own level.
func (g Grant) BucketIDs() []BucketID {
	var out []BucketID
	for _, a := range g.Allowances {
		for _, b := range a.Buckets {
			out = append(out, BucketID{Consumer: g.Consumer, ResourceType: a.ResourceType, Dims: b.Dims.Key()})
		}
	}
	return out
}
