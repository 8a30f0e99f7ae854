package bookkeeping

import (
	"maps"
	"slices"
	"strings"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// SeriesFor returns the series of k, created with its overall bucket when
// it does not exist.
func (bk *Books) SeriesFor(k Key) *Series {
	s, ok := bk.series[k]
	if !ok {
		s = &Series{key: k, buckets: map[string]*Bucket{}, granted: map[string]grantedReq{}}
		bk.series[k] = s
	}
	if _, ok := s.buckets[""]; !ok {
		b := &Bucket{}
		s.buckets[""] = b
		s.list = append(s.list, b)
		bk.touch(s, "")
	}
	return s
}

// bucketFor returns the bucket of a dimension set, creating it with the
// allocation of every granted request it covers.
func (bk *Books) bucketFor(s *Series, dims quota.Dimensions) *Bucket {
	key := dims.Key()
	if b, ok := s.buckets[key]; ok {
		return b
	}
	b := &Bucket{key: key, dims: dims}
	for _, r := range s.granted {
		if dims.SubsetOf(r.dims) {
			b.allocSum.Add(r.amount)
			b.claims++
		}
	}
	s.buckets[key] = b
	s.list = append(s.list, b)
	return b
}

// Prune drops dimensioned buckets no grant defines any more, and the whole
// series once neither grants nor claims refer to it. A series already
// dropped (another may hold its key now) is left alone.
func (bk *Books) Prune(s *Series) {
	if bk.series[s.key] != s {
		return
	}
	for key, b := range s.buckets {
		if key != "" && len(b.grants) == 0 {
			delete(s.buckets, key)
			s.list = slices.DeleteFunc(s.list, func(x *Bucket) bool { return x == b })
			bk.touch(s, key)
		}
	}
	if s.claims == 0 && len(s.granted) == 0 && len(s.buckets[""].grants) == 0 && len(s.buckets) == 1 {
		delete(bk.series, s.key)
		bk.drops++ // a list of series kept by the caller may name it
		bk.dropped = append(bk.dropped, s.key)
		bk.touch(s, "")
	}
}

// Drops counts the series dropped so far. A caller that keeps lists of
// series drops them when it changes: they may name a series that is gone.
func (bk *Books) Drops() uint64 { return bk.drops }

// Fresh is an empty map of m's type, in place of emptying m: a Go map keeps
// the room of the most it ever held, and clearing or ranging over it costs
// that room. The sets of what changed since a round hold every bucket after
// a rebuild and a handful later: each round starts them anew, so that it
// costs what changed since the last, not the most that ever changed.
func Fresh[M ~map[K]V, K comparable, V any](m M) M { return make(M) }

// FreshAbove is the size past which Emptied makes a set anew.
const FreshAbove = 16384

// Emptied is m emptied for the next round: cleared, keeping its room, when
// it held at most FreshAbove (a round's usual few, without allocating them
// again), made anew (Fresh) when it held more (after a rebuild).
func Emptied[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) > FreshAbove {
		return make(M)
	}
	clear(m)
	return m
}

// Grown is m, or a copy of it with room for n more entries when it holds
// fewer than n: a map grown entry by entry to a million rehashes its way
// there. For a rebuild, that knows how many are coming.
func Grown[M ~map[K]V, K comparable, V any](m M, n int) M {
	if len(m) >= n {
		return m
	}
	out := make(M, len(m)+n)
	maps.Copy(out, m)
	return out
}

// TakeDropped returns, and forgets, the keys of the series dropped since
// the last call: a caller that keeps lists of series drops those that may
// name them, and no other.
func (bk *Books) TakeDropped() []Key {
	out := bk.dropped
	bk.dropped = nil
	return out
}

func (bk *Books) touch(s *Series, dimsKey string) {
	bk.changedBuckets[bucketRef{s, dimsKey}] = struct{}{}
}

// touchBucket is touch for a bucket that exists, without hashing it again
// while it is marked.
func (bk *Books) touchBucket(s *Series, b *Bucket) {
	if !b.touched {
		b.touched = true
		bk.changedBuckets[bucketRef{s, b.key}] = struct{}{}
	}
}

// TouchAll marks every bucket of k's series changed, so that they are
// written again (a group's members changed, and with them the namespaces
// its buckets are copied to).
func (bk *Books) TouchAll(k Key) {
	if s, ok := bk.series[k]; ok {
		for key := range s.buckets {
			bk.touch(s, key)
		}
	}
}

// Bucket returns the state of a bucket; false when it does not exist
// (nothing refers to it).
func (bk *Books) Bucket(id quota.BucketID) (quota.BucketStatus, bool) {
	s, ok := bk.series[Key{id.Consumer, id.ResourceType}]
	if !ok {
		return quota.BucketStatus{}, false
	}
	b, ok := s.buckets[id.Dims]
	if !ok {
		return quota.BucketStatus{}, false
	}
	st := bk.Status(s, b)
	return st, true
}

// BucketIDs lists every existing bucket.
func (bk *Books) BucketIDs() []quota.BucketID {
	var ids []quota.BucketID
	for k, s := range bk.series {
		for key := range s.buckets {
			ids = append(ids, quota.BucketID{Consumer: k.Consumer, ResourceType: k.ResourceType, Dims: key})
		}
	}
	return ids
}

// ConsumerBucketIDs lists one consumer's buckets of the registered
// resource types: a look-up per type, not a walk of every bucket.
func (bk *Books) ConsumerBucketIDs(c quota.ConsumerID) []quota.BucketID {
	var ids []quota.BucketID
	for rt := range bk.active {
		if s := bk.series[Key{Consumer: c, ResourceType: rt}]; s != nil {
			for key := range s.buckets {
				ids = append(ids, quota.BucketID{Consumer: c, ResourceType: rt, Dims: key})
			}
		}
	}
	return ids
}

// TakeChanged returns, and forgets, what changed since the last call:
// buckets (possibly removed), grants and registrations whose validity may
// have changed.
func (bk *Books) TakeChanged() (buckets []quota.BucketID, grants, registrations []string) {
	buckets = make([]quota.BucketID, 0, len(bk.changedBuckets))
	for ref := range bk.changedBuckets {
		buckets = append(buckets, quota.BucketID{Consumer: ref.s.key.Consumer, ResourceType: ref.s.key.ResourceType, Dims: ref.key})
		if b, ok := ref.s.buckets[ref.key]; ok {
			b.touched = false
		}
	}
	for uid := range bk.changedGrants {
		grants = append(grants, uid)
	}
	for n := range bk.changedRegs {
		registrations = append(registrations, n)
	}
	bk.changedBuckets = Emptied(bk.changedBuckets)
	bk.changedGrants = Emptied(bk.changedGrants)
	bk.changedRegs = Emptied(bk.changedRegs)
	return buckets, grants, registrations
}

// Status is what a bucket of s shows: its numbers, the grants that define
// it, what each member cluster's objects hold of it, and whether it is
// unlimited (a level without a grant does not limit).
func (bk *Books) Status(s *Series, b *Bucket) quota.BucketStatus {
	st := quota.BucketStatus{ID: quota.BucketID{Consumer: s.key.Consumer, ResourceType: s.key.ResourceType, Dims: b.dims.Key()}, Dims: b.dims,
		Limit: b.Limit(), Allocated: b.Allocated(), Claims: b.claims}
	for _, g := range b.grants {
		st.Grants = append(st.Grants, g.c)
	}
	slices.SortFunc(st.Grants, func(x, y quota.GrantContribution) int {
		if c := strings.Compare(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	if s.clustered > 0 {
		st.Clusters = map[string]int64{}
		for _, g := range s.granted {
			if g.cluster != "" && b.dims.SubsetOf(g.dims) {
				st.Clusters[g.cluster] = quota.AddSat(st.Clusters[g.cluster], g.amount)
			}
		}
	}
	if !s.HasGrant() {
		reg, _ := bk.ActiveRegistration(s.key.ResourceType)
		st.Unlimited = s.key.Consumer.IsGroup() || len(reg.Levels) > 0
	}
	return st
}
