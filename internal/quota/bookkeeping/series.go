package bookkeeping

import "github.com/quotaplane/quotaplane/internal/quota"

// Key names the series.
func (s *Series) Key() Key { return s.key }

// Overall is the bucket without dimensions, which every series has.
func (s *Series) Overall() *Bucket { return s.buckets[""] }

// HasGrant reports whether any grant gives quota at this level: the
// overall bucket has one, or a dimensioned bucket exists (Prune drops those
// no grant defines).
func (s *Series) HasGrant() bool {
	return len(s.buckets[""].grants) > 0 || len(s.buckets) > 1
}

// Short returns the first bucket (by dimension key) of s that covers r and
// has less room than r asks, nil when r fits.
func (s *Series) Short(r quota.Request) *Bucket {
	var short *Bucket
	for _, b := range s.list {
		if !b.dims.SubsetOf(r.Dims) || b.Available() >= r.Amount {
			continue
		}
		if short == nil || b.key < short.key {
			short = b
		}
	}
	return short
}

// Tightest returns the bucket of s covering r with the least room.
func (s *Series) Tightest(r quota.Request) *Bucket {
	var out *Bucket
	for _, b := range s.list {
		if !b.dims.SubsetOf(r.Dims) {
			continue
		}
		if out == nil || b.Available() < out.Available() || (b.Available() == out.Available() && b.key < out.key) {
			out = b
		}
	}
	return out
}

// Ref counts a claim, of any outcome, that draws from s: Prune never drops
// a series a claim draws from.
func (s *Series) Ref() { s.claims++ }

// Unref is Ref undone; the caller prunes the series when it is done.
func (s *Series) Unref() { s.claims-- }

// Rekey moves what the claim old was granted of s to its new UID.
func (s *Series) Rekey(old, uid string) {
	if g, ok := s.granted[old]; ok {
		delete(s.granted, old)
		s.granted[uid] = g
	}
}

// Charge counts a granted request in every bucket of s that covers it.
func (bk *Books) Charge(s *Series, uid, cluster string, r quota.Request) {
	s.granted[uid] = grantedReq{amount: r.Amount, dims: r.Dims, cluster: cluster}
	if cluster != "" {
		s.clustered++
	}
	for _, b := range s.list {
		if b.dims.SubsetOf(r.Dims) {
			b.allocSum.Add(r.Amount)
			b.claims++
			bk.touchBucket(s, b)
		}
	}
}

// Uncharge is Charge undone.
func (bk *Books) Uncharge(s *Series, uid string, r quota.Request) {
	if g, ok := s.granted[uid]; ok && g.cluster != "" {
		s.clustered--
	}
	delete(s.granted, uid)
	for _, b := range s.list {
		if b.dims.SubsetOf(r.Dims) {
			b.allocSum.Sub(r.Amount)
			b.claims--
			bk.touchBucket(s, b)
		}
	}
}
