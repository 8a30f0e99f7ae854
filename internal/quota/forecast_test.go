package quota

import (
	"strings"
	"testing"
	"time"
)

func TestEstimateExhaustion(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	// 3 a day for the last 7 days, allocated 73 of 100 now: full in 9 days.
	var steady []UsageSample
	for d := 7; d >= 1; d-- {
		steady = append(steady, UsageSample{At: now.Add(-time.Duration(d) * day), Allocated: 73 - int64(3*d), Limit: 100})
	}
	// Older history outside the window, at another rate, is left out.
	withOld := append([]UsageSample{{At: now.Add(-30 * day), Allocated: 0}, {At: now.Add(-20 * day), Allocated: 50}}, steady...)
	for name, samples := range map[string][]UsageSample{"steady": steady, "older history ignored": withOld} {
		f := EstimateExhaustion(samples, now, 73, 100)
		if !f.Known || f.PerDay < 2.99 || f.PerDay > 3.01 {
			t.Fatalf("%s: rate %v known %v, want 3/day", name, f.PerDay, f.Known)
		}
		if got := f.FullAt.Sub(now); got < 9*day-time.Minute || got > 9*day+time.Minute {
			t.Errorf("%s: full in %s, want 9 days", name, got)
		}
		if got, want := f.Sentence(now), "at the last 7 days' rate, full in about 9 days"; got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
		if got, want := f.Trend(), "+3/day over 7 days"; got != want {
			t.Errorf("%s: trend %q, want %q", name, got, want)
		}
	}

	// Too little history: one sample, or two within the minimum span.
	for name, samples := range map[string][]UsageSample{
		"none":       nil,
		"one sample": {{At: now.Add(-2 * day), Allocated: 10}},
		"too recent": {{At: now.Add(-10 * time.Minute), Allocated: 1}, {At: now.Add(-5 * time.Minute), Allocated: 2}},
	} {
		f := EstimateExhaustion(samples, now, 3, 100)
		if f.Known || f.FullIn(now) != "too little history to tell" {
			t.Errorf("%s: %+v says %q, want too little history", name, f, f.FullIn(now))
		}
	}

	// Shrinking usage is not filling; a full bucket says so.
	var shrinking []UsageSample
	for d := 5; d >= 1; d-- {
		shrinking = append(shrinking, UsageSample{At: now.Add(-time.Duration(d) * day), Allocated: 50 + int64(d)})
	}
	if f := EstimateExhaustion(shrinking, now, 50, 100); !f.Known || f.PerDay >= 0 || f.FullIn(now) != "not filling" {
		t.Errorf("shrinking: %+v %q", f, f.FullIn(now))
	}
	if f := EstimateExhaustion(steady, now, 100, 100); f.FullIn(now) != "full now" {
		t.Errorf("full: %q", f.FullIn(now))
	}
}

func TestPlanLimitChange(t *testing.T) {
	grants := []RequestGrant{{Name: "old", Amount: 10, Order: 1}, {Name: "new", Amount: 5, Order: 2}}
	for _, tc := range []struct {
		name                       string
		current, allocated, target int64
		grants                     []RequestGrant
		wantGrant                  int64
		wantLowered                []RequestGrant
		wantErr                    string
	}{
		{name: "increase", current: 10, allocated: 4, target: 25, wantGrant: 15},
		{name: "same", current: 10, allocated: 4, target: 10},
		{name: "below usage", current: 10, allocated: 8, target: 5, wantErr: "below the 8 allocated now, by 3"},
		{name: "newest first", current: 115, allocated: 0, target: 108, grants: grants,
			wantLowered: []RequestGrant{{Name: "new", Amount: 0, Order: 2}, {Name: "old", Amount: 8, Order: 1}}},
		{name: "one grant enough", current: 115, allocated: 0, target: 112, grants: grants,
			wantLowered: []RequestGrant{{Name: "new", Amount: 2, Order: 2}}},
		{name: "not the platform's", current: 115, allocated: 0, target: 50, grants: grants, wantErr: "only to 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PlanLimitChange(tc.current, tc.allocated, tc.target, tc.grants)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Grant != tc.wantGrant || got.Target != tc.target || len(got.Lowered) != len(tc.wantLowered) {
				t.Fatalf("%+v", got)
			}
			for i := range got.Lowered {
				if got.Lowered[i] != tc.wantLowered[i] {
					t.Errorf("lowered[%d] = %+v, want %+v", i, got.Lowered[i], tc.wantLowered[i])
				}
			}
		})
	}
}
