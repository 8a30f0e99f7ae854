package accounting

import (
	"fmt"
	"math"
	"math/big"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// FuzzEngineNeverOverAllocates drives the engine with arbitrary operations —
// every path production takes: claims of 1–3 requests with dimensions
// decided one by one (the engine) or two together all-or-nothing
// (admission, its losers removed), claims restored as granted (a new
// leader's rebuild), claims renamed from a provisional ID (admission's
// claim written), releases, grants added and removed — and checks after
// every step that deciding never raises a bucket's allocation above its
// limit, and that every bucket's allocation and limit equal the exact sums of
// the granted requests and the grants it covers. (A dimensioned bucket added
// after claims were granted may start over its limit, and a restored claim
// may take a bucket over: nothing is revoked.)
func FuzzEngineNeverOverAllocates(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 3, 17})
	f.Add([]byte{0, 0, 0, 255, 255, 128, 64, 32})
	f.Add([]byte{3, 0, 5, 5, 1, 2, 5, 3, 1, 6, 1, 1, 7, 0, 0, 4, 0, 0, 2, 0, 0, 5, 9, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		runOps(t, ops, fuzzDraw{
			stride:      3,
			kinds:       8,
			claimAmount: func(rec []byte) int64 { return int64(1 + (rec[2]>>2)%4) },
			grantAmount: func(rec []byte) int64 { return int64(rec[2] % 6) },
		})
	})
}

// FuzzEngineSumsNeverWrap is FuzzEngineNeverOverAllocates with amounts drawn
// from the whole int64 range, most near MaxInt64, and grants that are also
// removed: limits, allocations and availability stay between 0 and MaxInt64,
// and equal the exact sums clamped to that range.
func FuzzEngineSumsNeverWrap(f *testing.F) {
	// Two grants of MaxInt64 for one consumer, then a claim of 1.
	f.Add([]byte{3, 4, 0, 1, 3, 4, 0, 1, 0, 4, 9, 0})
	// The same, then claims of MaxInt64 and 7, a release, a grant removed.
	f.Add([]byte{3, 4, 0, 1, 3, 4, 0, 1, 0, 4, 0, 1, 0, 4, 15, 0, 2, 0, 0, 0, 4, 0, 0, 0})
	f.Add([]byte{3, 16, 200, 3, 0, 6, 9, 2, 3, 48, 255, 7, 1, 14, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		amount := func(rec []byte) int64 { return drawAmount(rec[2], rec[3]) }
		runOps(t, ops, fuzzDraw{stride: 4, kinds: 5, claimAmount: amount, grantAmount: amount})
	})
}

// drawAmount spreads amounts over the whole int64 range, weighted towards
// where sums wrap: small amounts, amounts just below MaxInt64, 2^n-1 for
// every n, and arbitrary ones of either sign.
func drawAmount(b, k byte) int64 {
	switch k % 4 {
	case 0:
		return int64(b % 8)
	case 1:
		return math.MaxInt64 - int64(b%8)
	case 2:
		return math.MaxInt64 >> (b % 64)
	}
	return int64(uint64(b)<<56 | uint64(k)<<40 | uint64(b^k)<<16 | uint64(k))
}

// fuzzDraw says how runOps reads its operations.
type fuzzDraw struct {
	stride int // bytes per operation, at least 3: kind, a, b, ...
	kinds  int // 4, or 5 to remove grants too
	// claimAmount and grantAmount read an amount from an operation's bytes.
	claimAmount func(rec []byte) int64
	grantAmount func(rec []byte) int64
}

func runOps(t *testing.T, ops []byte, draw fuzzDraw) {
	rts := []string{"x.io/a", "x.io/b"}
	locs := []string{"dfw", "iad"}
	consumers := []quota.ConsumerID{org, {APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "beta"}}
	e := New()
	for _, rt := range rts {
		e.UpsertRegistration(reg(rt, rt))
	}
	var live, grantUIDs []string
	granted := map[string]quota.Claim{}
	grants := map[string]quota.Grant{}
	grantN := 0
	requests := func(rec []byte, a, b int) []quota.Request {
		var reqs []quota.Request
		for j := range 1 + b%3 {
			if j >= len(rts) {
				break
			}
			var d quota.Dimensions
			if (a>>(j+1))%2 == 1 {
				d = dims("location", locs[(a>>3)%2])
			}
			reqs = append(reqs, quota.Request{ResourceType: rts[(j+a)%2], Amount: draw.claimAmount(rec), Dims: d})
		}
		return reqs
	}
	for i := 0; i+draw.stride <= len(ops); i += draw.stride {
		rec := ops[i : i+draw.stride]
		op, a, b := int(rec[0])%draw.kinds, int(rec[1]), int(rec[2])
		c := consumers[a%2]
		snapshot := func() map[quota.BucketID]int64 {
			m := map[quota.BucketID]int64{}
			for _, id := range e.BucketIDs() {
				bs, _ := e.Bucket(id)
				m[id] = bs.Allocated
			}
			return m
		}
		// before is what deciding may not raise over a limit: taken before
		// the operation when the operation decides (together), after it
		// otherwise (a new grant may add a bucket already over its limit).
		before := snapshot()
		restored := false
		switch op {
		case 0, 1: // a claim
			uid := fmt.Sprintf("c%d", i)
			e.AddClaim(claim(uid, i, c, requests(rec, a, b)...))
			live = append(live, uid)
		case 5: // two claims of one create, decided together (admission)
			uids := []string{fmt.Sprintf("t%d-a", i), fmt.Sprintf("t%d-b", i)}
			e.AddClaim(claim(uids[0], i, c, requests(rec, a, b)...))
			e.AddClaim(claim(uids[1], i, consumers[(a>>1)%2], requests(rec, a>>1, b+1)...))
			if _, ok := e.DecideTogether(uids); ok {
				for _, uid := range uids {
					cl, _ := e.Claim(uid)
					granted[uid] = cl
					live = append(live, uid)
				}
			} else {
				for _, uid := range uids {
					e.RemoveClaim(uid)
				}
			}
		case 6: // a claim restored as granted (a new leader's rebuild)
			uid := fmt.Sprintf("r%d", i)
			cl := claim(uid, i, c, requests(rec, a, b)...)
			e.RestoreGranted(cl)
			granted[uid] = cl
			live = append(live, uid)
			restored = true
		case 7: // a claim renamed from its provisional ID (admission's claim written)
			if len(live) > 0 {
				k := b % len(live)
				old, uid := live[k], live[k]+"-w"
				if e.Rekey(old, uid) {
					live[k] = uid
					if cl, ok := granted[old]; ok {
						delete(granted, old)
						cl.UID = uid
						granted[uid] = cl
					}
				}
			}
		case 2: // a release
			if len(live) > 0 {
				k := b % len(live)
				e.RemoveClaim(live[k])
				delete(granted, live[k])
				live = append(live[:k], live[k+1:]...)
			}
		case 3: // a new grant
			grantN++
			var gb quota.GrantBucket
			gb.Amount = draw.grantAmount(rec)
			if a%3 == 0 {
				gb.Dims = dims("location", locs[(a>>2)%2])
			}
			g := grant(fmt.Sprintf("g%d", grantN), c, rts[(a>>4)%2], gb)
			e.UpsertGrant(g)
			grants[g.UID] = g
			grantUIDs = append(grantUIDs, g.UID)
		case 4: // a grant removed
			if len(grantUIDs) > 0 {
				k := b % len(grantUIDs)
				e.RemoveGrant(grantUIDs[k])
				delete(grants, grantUIDs[k])
				grantUIDs = append(grantUIDs[:k], grantUIDs[k+1:]...)
			}
		}
		if op != 5 {
			before = snapshot()
		}
		for _, ch := range e.Decide() {
			if ch.Decision.Outcome == quota.Granted {
				cl, _ := e.Claim(ch.UID)
				granted[ch.UID] = cl
			}
		}
		if restored {
			before = nil // a restored grant is not a decision: it may exceed
		}
		checkInvariants(t, e, granted, grants, before)
	}
}

// checkInvariants checks every bucket against sums computed exactly (with
// math/big) from the granted claims and the grants.
func checkInvariants(t *testing.T, e *Accounts, granted map[string]quota.Claim, grants map[string]quota.Grant, before map[quota.BucketID]int64) {
	t.Helper()
	for _, id := range e.BucketIDs() {
		b, _ := e.Bucket(id)
		if b.Limit < 0 || b.Allocated < 0 || b.Available() < 0 || b.Available() > b.Limit {
			t.Fatalf("bucket %+v wrapped: limit %d, allocated %d, available %d", id, b.Limit, b.Allocated, b.Available())
		}
		if prev, ok := before[id]; before != nil && (!ok || b.Allocated > prev) && b.Allocated > b.Limit {
			t.Fatalf("bucket %+v allocated %d > limit %d", id, b.Allocated, b.Limit)
		}
		if want := max(0, b.Limit-b.Allocated); b.Available() != want {
			t.Fatalf("bucket %+v available %d, want %d", id, b.Available(), want)
		}
		allocated := new(big.Int)
		for _, c := range granted {
			if c.Consumer != id.Consumer {
				continue
			}
			for _, r := range c.Requests {
				if r.ResourceType == id.ResourceType && b.Dims.SubsetOf(r.Dims) {
					allocated.Add(allocated, big.NewInt(r.Amount))
				}
			}
		}
		if want := clampBig(allocated); want != b.Allocated {
			t.Fatalf("bucket %+v allocated %d, granted claims sum to %s (shown as %d)", id, b.Allocated, allocated, want)
		}
		limit := new(big.Int)
		for _, g := range grants {
			if g.Consumer != id.Consumer {
				continue
			}
			for _, a := range g.Allowances {
				for _, gb := range a.Buckets {
					if a.ResourceType == id.ResourceType && gb.Dims.Key() == id.Dims {
						limit.Add(limit, big.NewInt(gb.Amount))
					}
				}
			}
		}
		if want := clampBig(limit); want != b.Limit {
			t.Fatalf("bucket %+v limit %d, grants sum to %s (shown as %d)", id, b.Limit, limit, want)
		}
	}
}

// clampBig is n clamped to [0, MaxInt64].
func clampBig(n *big.Int) int64 {
	switch {
	case n.Sign() < 0:
		return 0
	case !n.IsInt64():
		return math.MaxInt64
	}
	return n.Int64()
}
