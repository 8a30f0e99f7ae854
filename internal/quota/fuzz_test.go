package quota

import (
	"fmt"
	"testing"
)

// FuzzEngineNeverOverAllocates drives the engine with arbitrary operations
// (claims of 1–3 requests with dimensions, releases, grants that only grow)
// and checks after every step that deciding never raises a bucket's
// allocation above its limit, and that every bucket's allocation equals the
// sum of the granted requests it covers. (A dimensioned bucket added after
// claims were granted may start over its limit: nothing is revoked.)
func FuzzEngineNeverOverAllocates(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 3, 17})
	f.Add([]byte{0, 0, 0, 255, 255, 128, 64, 32})
	f.Fuzz(func(t *testing.T, ops []byte) {
		rts := []string{"x.io/a", "x.io/b"}
		locs := []string{"dfw", "iad"}
		consumers := []ConsumerID{org, {APIGroup: OrganizationGroup, Kind: "Organization", Name: "beta"}}
		e := NewEngine()
		for _, rt := range rts {
			e.UpsertRegistration(reg(rt, rt))
		}
		var live []string
		granted := map[string]Claim{}
		grantN := 0
		for i := 0; i+2 < len(ops); i += 3 {
			op, a, b := ops[i]%4, int(ops[i+1]), int(ops[i+2])
			c := consumers[a%2]
			switch op {
			case 0, 1: // a claim
				uid := fmt.Sprintf("c%d", i)
				var reqs []Request
				for j := range 1 + b%3 {
					if j >= len(rts) {
						break
					}
					var d Dimensions
					if (a>>(j+1))%2 == 1 {
						d = dims("location", locs[(a>>3)%2])
					}
					reqs = append(reqs, Request{rts[(j+a)%2], int64(1 + (b>>2)%4), d})
				}
				e.AddClaim(claim(uid, i, c, reqs...))
				live = append(live, uid)
			case 2: // a release
				if len(live) > 0 {
					k := b % len(live)
					e.RemoveClaim(live[k])
					delete(granted, live[k])
					live = append(live[:k], live[k+1:]...)
				}
			case 3: // a new grant (limits only grow here)
				grantN++
				var gb GrantBucket
				gb.Amount = int64(b % 6)
				if a%3 == 0 {
					gb.Dims = dims("location", locs[(a>>2)%2])
				}
				e.UpsertGrant(grant(fmt.Sprintf("g%d", grantN), c, rts[(a>>4)%2], gb))
			}
			before := map[BucketID]int64{}
			for _, id := range e.BucketIDs() {
				b, _ := e.Bucket(id)
				before[id] = b.Allocated
			}
			for _, ch := range e.Decide() {
				if ch.Decision.Outcome == Granted {
					cl, _ := e.Claim(ch.UID)
					granted[ch.UID] = cl
				}
			}
			checkInvariants(t, e, granted, before)
		}
	})
}

func checkInvariants(t *testing.T, e *Engine, granted map[string]Claim, before map[BucketID]int64) {
	t.Helper()
	for _, id := range e.BucketIDs() {
		b, _ := e.Bucket(id)
		if b.Allocated > before[id] && b.Allocated > b.Limit {
			t.Fatalf("bucket %+v allocated %d > limit %d", id, b.Allocated, b.Limit)
		}
		var sum int64
		for _, c := range granted {
			if c.Consumer != id.Consumer {
				continue
			}
			for _, r := range c.Requests {
				if r.ResourceType == id.ResourceType && b.Dims.SubsetOf(r.Dims) {
					sum += r.Amount
				}
			}
		}
		if sum != b.Allocated {
			t.Fatalf("bucket %+v allocated %d, granted claims sum to %d", id, b.Allocated, sum)
		}
	}
}
