package accounting

import (
	"slices"
	"strings"

	"github.com/quotaplane/quotaplane/internal/quota"
)

func (e *Accounts) seriesFor(k seriesKey) *series {
	s, ok := e.series[k]
	if !ok {
		s = &series{key: k, buckets: map[string]*bucket{}, granted: map[string]grantedReq{}}
		e.series[k] = s
	}
	if _, ok := s.buckets[""]; !ok {
		b := &bucket{grants: map[string]quota.GrantContribution{}}
		s.buckets[""] = b
		s.list = append(s.list, b)
		e.touch(s, "")
	}
	return s
}

// bucketFor returns the bucket of a dimension set, creating it with the
// allocation of every granted request it covers.
func (e *Accounts) bucketFor(s *series, dims quota.Dimensions) *bucket {
	key := dims.Key()
	if b, ok := s.buckets[key]; ok {
		return b
	}
	b := &bucket{key: key, dims: dims, grants: map[string]quota.GrantContribution{}}
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

// prune drops dimensioned buckets no grant defines any more, and the whole
// series once neither grants nor claims refer to it.
func (e *Accounts) prune(s *series) {
	for key, b := range s.buckets {
		if key != "" && len(b.grants) == 0 {
			delete(s.buckets, key)
			s.list = slices.DeleteFunc(s.list, func(x *bucket) bool { return x == b })
			e.touch(s, key)
		}
	}
	if s.claims == 0 && len(s.granted) == 0 && len(s.buckets[""].grants) == 0 && len(s.buckets) == 1 {
		delete(e.series, s.key)
		clear(e.levelCache) // a cached list may name it
		e.touch(s, "")
	}
}

func (e *Accounts) touch(s *series, dimsKey string) {
	e.changedBuckets[bucketRef{s, dimsKey}] = struct{}{}
}

// touchBucket is touch for a bucket that exists, without hashing it again
// while it is marked.
func (e *Accounts) touchBucket(s *series, b *bucket) {
	if !b.touched {
		b.touched = true
		e.changedBuckets[bucketRef{s, b.key}] = struct{}{}
	}
}

// Bucket returns the live state of a bucket; false when it does not exist
// (nothing refers to it).
func (e *Accounts) Bucket(id quota.BucketID) (quota.BucketStatus, bool) {
	e.refreshLevels()
	s, ok := e.series[seriesKey{id.Consumer, id.ResourceType}]
	if !ok {
		return quota.BucketStatus{}, false
	}
	b, ok := s.buckets[id.Dims]
	if !ok {
		return quota.BucketStatus{}, false
	}
	st := e.bucketStatus(s, b)
	return st, true
}

// BucketIDs lists every existing bucket.
func (e *Accounts) BucketIDs() []quota.BucketID {
	e.refreshLevels()
	var ids []quota.BucketID
	for k, s := range e.series {
		for key := range s.buckets {
			ids = append(ids, quota.BucketID{Consumer: k.Consumer, ResourceType: k.ResourceType, Dims: key})
		}
	}
	return ids
}

// TakeChanged returns, and forgets, what changed since the last call:
// buckets (possibly removed), grants and registrations whose validity may
// have changed.
func (e *Accounts) TakeChanged() (buckets []quota.BucketID, grants, registrations []string) {
	e.refreshLevels()
	for ref := range e.changedBuckets {
		buckets = append(buckets, quota.BucketID{Consumer: ref.s.key.Consumer, ResourceType: ref.s.key.ResourceType, Dims: ref.key})
		if b, ok := ref.s.buckets[ref.key]; ok {
			b.touched = false
		}
	}
	for uid := range e.changedGrants {
		grants = append(grants, uid)
	}
	for n := range e.changedRegs {
		registrations = append(registrations, n)
	}
	clear(e.changedBuckets)
	clear(e.changedGrants)
	clear(e.changedRegs)
	return buckets, grants, registrations
}

// hasGrant reports whether any grant gives quota at this level: the
// overall bucket has one, or a dimensioned bucket exists (prune drops those
// no grant defines).
func (s *series) hasGrant() bool {
	return len(s.buckets[""].grants) > 0 || len(s.buckets) > 1
}

// short returns the first bucket (by dimension key) of s that covers r and
// has less room than r asks, nil when r fits.
func (s *series) short(r quota.Request) *bucket {
	var short *bucket
	for _, b := range s.list {
		if !b.dims.SubsetOf(r.Dims) || b.available() >= r.Amount {
			continue
		}
		if short == nil || b.key < short.key {
			short = b
		}
	}
	return short
}

// tightest returns the bucket of s covering r with the least room.
func (s *series) tightest(r quota.Request) *bucket {
	var out *bucket
	for _, b := range s.list {
		if !b.dims.SubsetOf(r.Dims) {
			continue
		}
		if out == nil || b.available() < out.available() || (b.available() == out.available() && b.key < out.key) {
			out = b
		}
	}
	return out
}

func (e *Accounts) bucketStatus(s *series, b *bucket) quota.BucketStatus {
	st := quota.BucketStatus{ID: quota.BucketID{Consumer: s.key.Consumer, ResourceType: s.key.ResourceType, Dims: b.dims.Key()}, Dims: b.dims,
		Limit: b.limit(), Allocated: b.allocated(), Claims: b.claims}
	for _, g := range b.grants {
		st.Grants = append(st.Grants, g)
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
	if !s.hasGrant() {
		reg, _ := e.activeRegistration(s.key.ResourceType)
		st.Unlimited = s.key.Consumer.IsGroup() || len(reg.Levels) > 0
	}
	return st
}
