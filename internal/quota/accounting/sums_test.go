package accounting

import (
	"math"
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"

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
		run          func(e *Accounts)
		wantOutcomes map[string]quota.Outcome
		wantBucket   numbers
		// wantMessage is part of the message of the claim "denied".
		wantMessage string
	}{{
		name: "two grants of MaxInt64 make a limit of MaxInt64",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g1", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g2", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("one", 1, org, quota.Request{ResourceType: rt, Amount: 1, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"one": quota.Granted},
		wantBucket:   numbers{maxAmount, 1, maxAmount - 1},
	}, {
		name: "one grant listing MaxInt64 twice for the same dimensions",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g", org, rt, quota.GrantBucket{Amount: maxAmount}, quota.GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("all", 1, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"all": quota.Granted},
		wantBucket:   numbers{maxAmount, maxAmount, 0},
	}, {
		name: "removing grants after the limit saturated leaves the exact sum of the rest",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g1", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g2", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g3", org, rt, quota.GrantBucket{Amount: 5}))
			e.RemoveGrant("g1")
			e.RemoveGrant("g2")
			e.AddClaim(claim("five", 1, org, quota.Request{ResourceType: rt, Amount: 5, Dims: nil}))
			e.AddClaim(claim("denied", 2, org, quota.Request{ResourceType: rt, Amount: 1, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"five": quota.Granted, "denied": quota.QuotaExceeded},
		wantBucket:   numbers{5, 5, 0},
		wantMessage:  "only 0 of the limit 5 is available (5 allocated",
	}, {
		name: "a request on top of an allocation of MaxInt64 is denied, not wrapped",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g1", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.UpsertGrant(grant("g2", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("almost", 1, org, quota.Request{ResourceType: rt, Amount: maxAmount - 1, Dims: nil}))
			e.AddClaim(claim("denied", 2, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
			e.AddClaim(claim("last", 3, org, quota.Request{ResourceType: rt, Amount: 1, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"almost": quota.Granted, "denied": quota.QuotaExceeded, "last": quota.Granted},
		wantBucket:   numbers{maxAmount, maxAmount, 0},
		wantMessage:  "requested 9223372036854775807 units of x.io/p for Organization.resourcemanager.miloapis.com acme, but only 1 of the limit 9223372036854775807 is available (9223372036854775806 allocated",
	}, {
		name: "restored grants past MaxInt64 saturate the allocation and leave no room",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g", org, rt, quota.GrantBucket{Amount: 10}))
			e.RestoreGranted(claim("old1", 1, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
			e.RestoreGranted(claim("old2", 2, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
			e.AddClaim(claim("denied", 3, org, quota.Request{ResourceType: rt, Amount: 5, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"old1": quota.Granted, "old2": quota.Granted, "denied": quota.QuotaExceeded},
		wantBucket:   numbers{10, maxAmount, 0},
		wantMessage:  "only 0 of the limit 10 is available (9223372036854775807 allocated",
	}, {
		name: "releasing one of the restored grants leaves the exact allocation of the other",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g", org, rt, quota.GrantBucket{Amount: 10}))
			e.RestoreGranted(claim("old1", 1, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
			e.RestoreGranted(claim("old2", 2, org, quota.Request{ResourceType: rt, Amount: 4, Dims: nil}))
			e.RestoreGranted(claim("old3", 3, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
			e.RemoveClaim("old1")
			e.RemoveClaim("old3")
			e.AddClaim(claim("six", 4, org, quota.Request{ResourceType: rt, Amount: 6, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"old2": quota.Granted, "six": quota.Granted},
		wantBucket:   numbers{10, 10, 0},
	}, {
		// A claim's requests are never summed: asking for one resource type
		// twice is refused whatever the amounts, so such a sum cannot wrap.
		name: "two requests of one resource type whose sum overflows are refused",
		run: func(e *Accounts) {
			e.UpsertGrant(grant("g", org, rt, quota.GrantBucket{Amount: maxAmount}))
			e.AddClaim(claim("denied", 1, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
		},
		wantOutcomes: map[string]quota.Outcome{"denied": quota.ValidationFailed},
		wantBucket:   numbers{maxAmount, 0, maxAmount},
		wantMessage:  "resource type x.io/p is requested twice; put the amounts in one request",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := New()
			e.UpsertRegistration(reg("p", rt))
			tc.run(e)
			e.Decide()
			got := map[string]quota.Outcome{}
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
	e := New()
	e.UpsertRegistration(reg("p", rt))
	e.UpsertGrant(grant("g1", org, rt, quota.GrantBucket{Amount: maxAmount}))
	e.UpsertGrant(grant("g2", org, rt, quota.GrantBucket{Amount: maxAmount}))
	e.AddClaim(claim("p1", 1, org, quota.Request{ResourceType: rt, Amount: maxAmount, Dims: nil}))
	e.AddClaim(claim("p2", 2, org, quota.Request{ResourceType: rt, Amount: 1, Dims: nil}))
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
