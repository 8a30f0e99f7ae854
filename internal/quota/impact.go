package quota

import (
	"cmp"
	"slices"
	"time"
)

// ImpactObject is one existing object a policy would charge, with what it
// would hold in each bucket.
type ImpactObject struct {
	// Name identifies the object in messages (Kind namespace/name).
	Name    string
	Created time.Time
	Charges []ImpactCharge
}

// ImpactCharge is an amount an object would hold in one bucket.
type ImpactCharge struct {
	Bucket BucketID
	Amount int64
}

// BucketNow is a bucket's limit and allocation before a policy comes into
// force. A bucket no grant gives a limit has limit 0: every charge to it
// would be refused, as the engine refuses it.
type BucketNow struct {
	Limit     int64
	Allocated int64
}

// BucketImpact is what a policy coming into force would do to one bucket.
type BucketImpact struct {
	Bucket         BucketID
	Limit          int64
	Allocated      int64
	AllocatedAfter int64
	Objects        int64
	WouldRefuse    int64
}

// Over is how far over its limit the bucket would be, 0 when within.
func (b BucketImpact) Over() int64 {
	if b.AllocatedAfter <= b.Limit {
		return 0
	}
	return b.AllocatedAfter - b.Limit
}

// ImpactResult is what a policy coming into force would do to the objects
// that exist: each object, taken in creation order, fits (its every charge
// within its bucket's limit after the objects before it that fit) or would
// be refused if it were created now. Coming into force charges both (the
// objects exist), so AllocatedAfter counts every charge.
type ImpactResult struct {
	Fits, Refused int64
	// RefusedObjects are the objects that would not fit, in creation order.
	RefusedObjects []string
	// Buckets are every bucket charged, by consumer, resource type and
	// dimensions.
	Buckets []BucketImpact
}

// OverLimit are the buckets the policy would put over their limits, the
// largest excess first, at most n of them, and how many there are in all.
func (r ImpactResult) OverLimit(n int) ([]BucketImpact, int64) {
	var over []BucketImpact
	for _, b := range r.Buckets {
		if b.Over() > 0 && b.AllocatedAfter > b.Allocated {
			over = append(over, b)
		}
	}
	total := int64(len(over))
	slices.SortStableFunc(over, func(a, b BucketImpact) int { return cmp.Compare(b.Over(), a.Over()) })
	if len(over) > n {
		over = over[:n]
	}
	return over, total
}

// Impact decides, charging nothing, what charging objects would do to the
// buckets now reads; keepRefused bounds RefusedObjects. Sums saturate, as
// the engine's do.
func Impact(objects []ImpactObject, now func(BucketID) BucketNow, keepRefused int) ImpactResult {
	order := slices.Clone(objects)
	slices.SortStableFunc(order, func(a, b ImpactObject) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	type state struct {
		BucketImpact
		fitting int64
	}
	buckets := map[BucketID]*state{}
	get := func(id BucketID) *state {
		s := buckets[id]
		if s == nil {
			n := now(id)
			s = &state{BucketImpact: BucketImpact{Bucket: id, Limit: n.Limit, Allocated: n.Allocated, AllocatedAfter: n.Allocated}, fitting: n.Allocated}
			buckets[id] = s
		}
		return s
	}
	var res ImpactResult
	for _, o := range order {
		// The object's charges per bucket, summed: two requests of one
		// object to one bucket are decided together.
		sums := map[BucketID]int64{}
		var ids []BucketID
		for _, c := range o.Charges {
			if _, seen := sums[c.Bucket]; !seen {
				ids = append(ids, c.Bucket)
			}
			sums[c.Bucket] = AddSat(sums[c.Bucket], c.Amount)
		}
		fits := true
		for _, id := range ids {
			s := get(id)
			if AddSat(s.fitting, sums[id]) > s.Limit {
				fits = false
			}
		}
		for _, id := range ids {
			s := get(id)
			s.Objects++
			s.AllocatedAfter = AddSat(s.AllocatedAfter, sums[id])
			if fits {
				s.fitting = AddSat(s.fitting, sums[id])
			} else {
				s.WouldRefuse++
			}
		}
		if fits {
			res.Fits++
			continue
		}
		res.Refused++
		if len(res.RefusedObjects) < keepRefused {
			res.RefusedObjects = append(res.RefusedObjects, o.Name)
		}
	}
	for _, s := range buckets {
		res.Buckets = append(res.Buckets, s.BucketImpact)
	}
	slices.SortFunc(res.Buckets, func(a, b BucketImpact) int {
		return cmp.Or(cmp.Compare(a.Bucket.Consumer.String(), b.Bucket.Consumer.String()),
			cmp.Compare(a.Bucket.ResourceType, b.Bucket.ResourceType), cmp.Compare(a.Bucket.Dims, b.Bucket.Dims))
	})
	return res
}
