package quota

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const maxAmount = math.MaxInt64

// TestSumsNeverWrap: limits, allocations and the numbers of a denial saturate
// at MaxInt64; none wraps to a negative that denies everything or lets a
// claim in.
func TestSumsNeverWrap(t *testing.T) {
	const rt = "x.io/p"
	for _, tc := range []struct {
		name string
		// run acts on an engine where rt is registered and decides.
		run          func(e *Engine)
		wantOutcomes map[string]Outcome
		wantBucket   numbers
		// wantMessage is part of the message of the claim "denied".
		wantMessage string
	}{{
		name: "two grants of MaxInt64 make a limit of MaxInt64",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g1", org, rt, GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g2", org, rt, GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("one", 1, org, Request{rt, 1, nil}))
		},
		wantOutcomes: map[string]Outcome{"one": Granted},
		wantBucket:   numbers{maxAmount, 1, maxAmount - 1},
	}, {
		name: "one grant listing MaxInt64 twice for the same dimensions",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g", org, rt, GrantBucket{Amount: maxAmount}, GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("all", 1, org, Request{rt, maxAmount, nil}))
		},
		wantOutcomes: map[string]Outcome{"all": Granted},
		wantBucket:   numbers{maxAmount, maxAmount, 0},
	}, {
		name: "removing grants after the limit saturated leaves the exact sum of the rest",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g1", org, rt, GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g2", org, rt, GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g3", org, rt, GrantBucket{Amount: 5}))
			e.RemoveGrant("g1")
			e.RemoveGrant("g2")
			e.AddClaim(claim("five", 1, org, Request{rt, 5, nil}))
			e.AddClaim(claim("denied", 2, org, Request{rt, 1, nil}))
		},
		wantOutcomes: map[string]Outcome{"five": Granted, "denied": QuotaExceeded},
		wantBucket:   numbers{5, 5, 0},
		wantMessage:  "only 0 of the limit 5 is available (5 allocated",
	}, {
		name: "a request on top of an allocation of MaxInt64 is denied, not wrapped",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g1", org, rt, GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g2", org, rt, GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("almost", 1, org, Request{rt, maxAmount - 1, nil}))
			e.AddClaim(claim("denied", 2, org, Request{rt, maxAmount, nil}))
			e.AddClaim(claim("last", 3, org, Request{rt, 1, nil}))
		},
		wantOutcomes: map[string]Outcome{"almost": Granted, "denied": QuotaExceeded, "last": Granted},
		wantBucket:   numbers{maxAmount, maxAmount, 0},
		wantMessage:  "requested 9223372036854775807 unit of x.io/p for Organization.resourcemanager.miloapis.com acme, but only 1 of the limit 9223372036854775807 is available (9223372036854775806 allocated",
	}, {
		name: "restored grants past MaxInt64 saturate the allocation and leave no room",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g", org, rt, GrantBucket{Amount: 10}))
			e.RestoreGranted(claim("old1", 1, org, Request{rt, maxAmount, nil}))
			e.RestoreGranted(claim("old2", 2, org, Request{rt, maxAmount, nil}))
			e.AddClaim(claim("denied", 3, org, Request{rt, 5, nil}))
		},
		wantOutcomes: map[string]Outcome{"old1": Granted, "old2": Granted, "denied": QuotaExceeded},
		wantBucket:   numbers{10, maxAmount, 0},
		wantMessage:  "only 0 of the limit 10 is available (9223372036854775807 allocated",
	}, {
		name: "releasing one of the restored grants leaves the exact allocation of the other",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g", org, rt, GrantBucket{Amount: 10}))
			e.RestoreGranted(claim("old1", 1, org, Request{rt, maxAmount, nil}))
			e.RestoreGranted(claim("old2", 2, org, Request{rt, 4, nil}))
			e.RestoreGranted(claim("old3", 3, org, Request{rt, maxAmount, nil}))
			e.RemoveClaim("old1")
			e.RemoveClaim("old3")
			e.AddClaim(claim("six", 4, org, Request{rt, 6, nil}))
		},
		wantOutcomes: map[string]Outcome{"old2": Granted, "six": Granted},
		wantBucket:   numbers{10, 10, 0},
	}, {
		// A claim's requests are never summed: asking for one resource type
		// twice is refused whatever the amounts, so such a sum cannot wrap.
		name: "two requests of one resource type whose sum overflows are refused",
		run: func(e *Engine) {
			e.UpsertGrant(grant("g", org, rt, GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("denied", 1, org, Request{rt, maxAmount, nil}, Request{rt, maxAmount, nil}))
		},
		wantOutcomes: map[string]Outcome{"denied": ValidationFailed},
		wantBucket:   numbers{maxAmount, 0, maxAmount},
		wantMessage:  "resource type x.io/p is requested twice; put the amounts in one request",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine()
			e.UpsertRegistration(reg("p", rt))
			tc.run(e)
			e.Decide()
			got := map[string]Outcome{}
			for uid := range tc.wantOutcomes {
				got[uid] = outcomes(e, uid)[0]
			}
			if diff := cmp.Diff(tc.wantOutcomes, got); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantBucket, nums(t, e, org, rt, nil)); diff != "" {
				t.Errorf("bucket (-want +got):\n%s", diff)
			}
			if tc.wantMessage != "" {
				if d, _ := e.Decision("denied"); !strings.Contains(d.Message, tc.wantMessage) {
					t.Errorf("message %q lacks %q", d.Message, tc.wantMessage)
				}
			}
		})
	}
}

// TestDecideTogetherNeverWraps: claims decided together for one bucket are
// checked against what the earlier ones took, without wrapping.
func TestDecideTogetherNeverWraps(t *testing.T) {
	const rt = "x.io/p"
	e := NewEngine()
	e.UpsertRegistration(reg("p", rt))
	e.UpsertGrant(grant("g1", org, rt, GrantBucket{Amount: maxAmount}))
	e.UpsertGrant(grant("g2", org, rt, GrantBucket{Amount: maxAmount}))
	e.AddClaim(claim("p1", 1, org, Request{rt, maxAmount, nil}))
	e.AddClaim(claim("p2", 2, org, Request{rt, 1, nil}))
	if _, ok := e.DecideTogether([]string{"p1", "p2"}); ok {
		t.Fatal("granted MaxInt64+1 against a limit of MaxInt64")
	}
	if diff := cmp.Diff(numbers{maxAmount, 0, maxAmount}, nums(t, e, org, rt, nil)); diff != "" {
		t.Errorf("p1's allocation was not undone (-want +got):\n%s", diff)
	}
	if _, ok := e.DecideTogether([]string{"p1"}); !ok {
		t.Fatal("denied MaxInt64 against a limit of MaxInt64")
	}
}

func TestSumHelpers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"addSat small", addSat(2, 3), 5},
		{"addSat up to MaxInt64", addSat(maxAmount-1, 1), maxAmount},
		{"addSat past MaxInt64", addSat(maxAmount, maxAmount), maxAmount},
		{"addSat past MinInt64", addSat(math.MinInt64, -1), math.MinInt64},
		{"addSat negative", addSat(5, -7), -2},
		{"room", room(10, 3), 7},
		{"room over the limit", room(3, 10), 0},
		{"room at MaxInt64", room(maxAmount, 0), maxAmount},
		{"room from a negative allocation", room(maxAmount, -5), maxAmount},
		{"total of three MaxInt64", sum(maxAmount, maxAmount, maxAmount), maxAmount},
		{"total back below MaxInt64", sum(maxAmount, maxAmount, 7, -maxAmount, -maxAmount), 7},
		{"total below 0", sum(3, -5), 0},
		{"total of MinInt64 terms", sum(math.MinInt64, math.MinInt64, maxAmount), 0},
		{"total back from below MinInt64", sum(math.MinInt64, math.MinInt64, -math.MinInt64-1, -math.MinInt64-1, 2, 9), 9},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	var tot total
	tot.add(maxAmount)
	tot.add(maxAmount)
	tot.sub(maxAmount)
	tot.sub(maxAmount - 4)
	if got := tot.value(); got != 4 {
		t.Errorf("add and sub: got %d, want 4", got)
	}
}

func sum(vs ...int64) int64 {
	var t total
	for _, v := range vs {
		t.add(v)
	}
	return t.value()
}
