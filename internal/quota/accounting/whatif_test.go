package accounting

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// snapshot is every bucket's numbers.
func snapshot(e *Accounts) map[quota.BucketID][2]int64 {
	out := map[quota.BucketID][2]int64{}
	for _, id := range e.BucketIDs() {
		b, _ := e.Bucket(id)
		out[id] = [2]int64{b.Limit, b.Allocated}
	}
	return out
}

// A simulation decides each step after the ones before it, exactly as
// deciding the same claims for real one by one, and leaves the accounts as
// they were: every bucket's numbers, and nothing to decide again.
func TestWhatIfDecidesInOrderAndLeavesNothing(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			build := func() *Accounts {
				e := hierarchy(t)
				e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 20}))
				e.UpsertGrant(grant("web", proj("web"), vcpu, quota.GrantBucket{Amount: 12}))
				e.UpsertGrant(grant("api", proj("api"), vcpu, quota.GrantBucket{Amount: 12}))
				e.AddClaim(claim("held", 0, proj("web"), quota.Request{ResourceType: vcpu, Amount: 3}))
				e.Decide()
				return e
			}
			var steps [][]quota.Claim
			for i := range 12 {
				p := []string{"web", "api"}[rnd.IntN(2)]
				n := 1 + rnd.IntN(2)
				var set []quota.Claim
				for j := range n {
					set = append(set, claim(fmt.Sprintf("c%d-%d", i, j), 10+i, proj(p), quota.Request{ResourceType: vcpu, Amount: int64(1 + rnd.IntN(4))}))
				}
				steps = append(steps, set)
			}

			real := build()
			var want []bool
			for _, set := range steps {
				var uids []string
				for _, c := range set {
					real.AddClaim(c)
					uids = append(uids, c.UID)
				}
				_, ok := real.DecideTogether(uids)
				if !ok {
					for _, u := range uids {
						real.RemoveClaim(u)
					}
				}
				want = append(want, ok)
			}

			sim := build()
			before := snapshot(sim)
			w := sim.WhatIf()
			var got []bool
			for _, set := range steps {
				_, ok := w.Decide(set)
				got = append(got, ok)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("simulated outcomes differ from deciding for real (-real +simulated):\n%s", diff)
			}
			for _, b := range w.Buckets() {
				r, _ := real.Bucket(b.After.ID)
				if r.Allocated != b.After.Allocated {
					t.Errorf("bucket %s after: simulated %d, real %d", b.After.ID, b.After.Allocated, r.Allocated)
				}
				if bb := before[b.Before.ID]; bb[1] != b.Before.Allocated {
					t.Errorf("bucket %s before: recorded %d, was %d", b.Before.ID, b.Before.Allocated, bb[1])
				}
			}
			w.Undo()
			if diff := cmp.Diff(before, snapshot(sim)); diff != "" {
				t.Fatalf("the simulation left the buckets changed (-before +after):\n%s", diff)
			}
			if changed := sim.Decide(); len(changed) != 0 {
				t.Fatalf("the simulation left claims to decide: %v", changed)
			}
			if sim.Claims() != 1 {
				t.Fatalf("the accounts hold %d claims after the simulation, want the 1 they held", sim.Claims())
			}
		})
	}
}

// A released claim's room is there for the next step, and is held again at
// Undo.
func TestWhatIfReleaseGivesRoomUntilUndo(t *testing.T) {
	e := hierarchy(t)
	e.UpsertGrant(grant("web", proj("web"), vcpu, quota.GrantBucket{Amount: 5}))
	e.AddClaim(claim("big", 0, proj("web"), quota.Request{ResourceType: vcpu, Amount: 5}))
	e.Decide()
	w := e.WhatIf()
	if _, ok := w.Decide([]quota.Claim{claim("more", 1, proj("web"), quota.Request{ResourceType: vcpu, Amount: 2})}); ok {
		t.Fatal("a claim past the limit was granted in the simulation")
	}
	w.Release("big")
	w.Hold(claim("smaller", 2, proj("web"), quota.Request{ResourceType: vcpu, Amount: 1}))
	if _, ok := w.Decide([]quota.Claim{claim("more2", 3, proj("web"), quota.Request{ResourceType: vcpu, Amount: 4})}); !ok {
		t.Fatal("the room a shrink gives back was not there for the next step")
	}
	bs := w.Buckets()
	if len(bs) == 0 || bs[0].Before.Allocated != 5 || bs[0].After.Allocated != 5 {
		t.Fatalf("buckets: %+v, want web at 5 before and 5 after (1 + 4)", bs)
	}
	w.Undo()
	if got := nums(t, e, proj("web"), vcpu, nil); got != (numbers{5, 5, 0}) {
		t.Fatalf("after Undo web is %+v, want the released claim held again", got)
	}
	if d, _ := e.Decision("big"); d.Outcome != quota.Granted {
		t.Fatalf("the released claim is %s after Undo", d.Outcome)
	}
}

// BenchmarkWhatIf1000 is the part of a 1,000-object review the engine's
// lock is held for: 1,000 claims decided in order, against two projects and
// their organization, then undone.
func BenchmarkWhatIf1000(b *testing.B) {
	e := New()
	e.UpsertRegistration(quota.Registration{Name: "vcpu", Created: t0, ResourceType: vcpu, ConsumerType: project, BaseUnit: "core",
		Claiming: []quota.GroupKind{{Group: "", Kind: "ConfigMap"}}, Levels: []quota.GroupKind{orgType}})
	e.SetConsumer(org, quota.ConsumerInfo{})
	for _, p := range []string{"web", "api"} {
		e.SetConsumer(proj(p), quota.ConsumerInfo{Parent: &org})
		e.UpsertGrant(grant(p, proj(p), vcpu, quota.GrantBucket{Amount: 1000}))
	}
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 1500}))
	steps := make([][]quota.Claim, 1000)
	for i := range steps {
		p := []string{"web", "api"}[i%2]
		steps[i] = []quota.Claim{claim(fmt.Sprintf("c%d", i), i, proj(p), quota.Request{ResourceType: vcpu, Amount: int64(1 + i%2)})}
	}
	b.ResetTimer()
	for range b.N {
		w := e.WhatIf()
		for _, s := range steps {
			w.Decide(s)
		}
		w.Buckets()
		w.Undo()
	}
}
