package quota

import (
	"testing"
	"time"
)

func TestWindowPhases(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	from, until := t0.Add(time.Hour), t0.Add(2*time.Hour)
	for _, tc := range []struct {
		name    string
		w       Window
		now     time.Time
		at      Phase
		initial Phase
	}{
		{"open", Window{}, t0, PhaseActive, PhaseActive},
		{"before its start", Window{From: from}, t0, PhaseScheduled, PhaseScheduled},
		{"at its start", Window{From: from}, from, PhaseActive, PhaseScheduled},
		{"inside", Window{From: from, Until: until}, from.Add(time.Minute), PhaseActive, PhaseScheduled},
		{"at its end", Window{From: from, Until: until}, until, PhaseExpired, PhaseScheduled},
		{"an end only, before it", Window{Until: until}, t0, PhaseActive, PhaseActive},
		{"an end only, after it", Window{Until: until}, until.Add(time.Second), PhaseExpired, PhaseActive},
	} {
		if got := tc.w.At(tc.now); got != tc.at {
			t.Errorf("%s: At = %s, want %s", tc.name, got, tc.at)
		}
		if got := tc.w.Initial(); got != tc.initial {
			t.Errorf("%s: Initial = %s, want %s", tc.name, got, tc.initial)
		}
	}
}

// A recorded phase is honoured whatever the clock says; the clock only
// moves a grant on by a new record, and never back.
func TestWindowRecordsAreHonoured(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	w := Window{From: t0.Add(time.Hour), Until: t0.Add(2 * time.Hour)}
	if h := w.Honoured(); h != PhaseScheduled || w.Counts(h) {
		t.Fatalf("nothing recorded: honoured %s (counts %v), want Scheduled, not counting", h, w.Counts(h))
	}
	// Past its start by the clock, but not recorded: still Scheduled, and
	// the start is due.
	now := t0.Add(90 * time.Minute)
	if p, ok := w.Due(w.Honoured(), now); !ok || p != PhaseActive {
		t.Fatalf("Due after the start = %s, %v; want Active, true", p, ok)
	}
	// Recorded Expired (by a leader whose clock was ahead): a leader whose
	// clock is behind the start honours it, and has nothing to record.
	h := w.Honoured(PhaseExpired, PhaseUnknown)
	if h != PhaseExpired || w.Counts(h) {
		t.Fatalf("recorded Expired: honoured %s, counts %v", h, w.Counts(h))
	}
	if p, ok := w.Due(h, t0); ok {
		t.Fatalf("a clock behind a recorded expiry records %s", p)
	}
	// Both passed at once: Expired is due straight from Scheduled.
	if p, ok := w.Due(PhaseScheduled, t0.Add(3*time.Hour)); !ok || p != PhaseExpired {
		t.Fatalf("Due after both bounds = %s, %v; want Expired", p, ok)
	}
	if next, ok := w.Next(PhaseScheduled); !ok || !next.Equal(w.From) {
		t.Fatalf("Next from Scheduled = %s, %v", next, ok)
	}
	if next, ok := w.Next(PhaseActive); !ok || !next.Equal(w.Until) {
		t.Fatalf("Next from Active = %s, %v", next, ok)
	}
	if _, ok := w.Next(PhaseExpired); ok {
		t.Fatal("Next from Expired: want none")
	}
	if (Window{}).Bounded() || !(Window{}).Counts(PhaseUnknown) {
		t.Fatal("a grant without a window counts, always")
	}
	for _, p := range []Phase{PhaseScheduled, PhaseActive, PhaseExpired} {
		if ParsePhase(p.String()) != p {
			t.Errorf("ParsePhase(%s) = %s", p, ParsePhase(p.String()))
		}
	}
}
