package bookkeeping

import "github.com/quotaplane/quotaplane/internal/quota"

// Books holds registrations, grants and the buckets of every consumer and
// resource type. It is not safe for concurrent use: the caller serializes
// access.
type Books struct {
	regs   map[string]quota.Registration // by name
	active map[string]string             // resourceType → name of the active registration

	grants     map[string]quota.Grant // by UID
	grantValid map[string]quota.Validity
	// phases are the grants' window phases as last applied.
	phases map[string]quota.Phase

	series map[Key]*Series
	// drops counts the series dropped so far: a list of series kept while
	// it stays the same names none that is gone.
	drops uint64
	// dropped are the keys of the series dropped since TakeDropped.
	dropped []Key

	changedBuckets map[bucketRef]struct{}
	changedGrants  map[string]struct{}
	changedRegs    map[string]struct{}

	// holds are delegated-budget reservations of grants being admitted
	// (budget.go), by grant namespace/name.
	holds map[string]budgetHold
}

// Key names the series of one consumer and one resource type.
type Key struct {
	Consumer     quota.ConsumerID
	ResourceType string
}

// Series is everything of one consumer and one resource type: its buckets
// and the granted requests charged to it.
type Series struct {
	key     Key
	buckets map[string]*Bucket    // by Dimensions.Key(); "" is the overall bucket
	list    []*Bucket             // the same buckets, for iterating without a map
	granted map[string]grantedReq // by claim UID
	claims  int                   // claims of any outcome that request this resource type
	// clustered counts granted requests of member clusters' objects.
	clustered int
}

// bucketRef names a bucket cheaply (a pointer and a short key) for change
// tracking; the series pointer stays valid after the series is dropped.
type bucketRef struct {
	s   *Series
	key string
}

type grantedReq struct {
	amount  int64
	dims    quota.Dimensions
	cluster string // the member cluster of the claim's object, "" for none
}

// Bucket is the limit and the allocation of one dimension set of a series.
type Bucket struct {
	key      string // dims.Key()
	touched  bool   // in Books.changedBuckets
	dims     quota.Dimensions
	allocSum quota.Total // sum of the granted requests it covers
	claims   int32
	// grants define the bucket: a short list (one grant, usually), indexed
	// by UID in byUID once it is long. A map per bucket cost 8 % of a
	// rebuild and more memory than the bucket.
	grants   []bucketGrant
	byUID    map[string]int
	limitSum quota.Total // sum of grants' amounts
}

// bucketGrant is one grant's contribution to a bucket.
type bucketGrant struct {
	uid string
	c   quota.GrantContribution
}

// indexGrantsAbove is the number of grants past which a bucket indexes them.
const indexGrantsAbove = 16

// grant is the contribution of grant uid, and whether it has one.
func (b *Bucket) grant(uid string) (quota.GrantContribution, int, bool) {
	if b.byUID != nil {
		i, ok := b.byUID[uid]
		if !ok {
			return quota.GrantContribution{}, -1, false
		}
		return b.grants[i].c, i, true
	}
	for i := range b.grants {
		if b.grants[i].uid == uid {
			return b.grants[i].c, i, true
		}
	}
	return quota.GrantContribution{}, -1, false
}

// Limit is the sum of the grants that define the bucket.
func (b *Bucket) Limit() int64 { return b.limitSum.Value() }

// Allocated is the sum of the granted requests the bucket covers.
func (b *Bucket) Allocated() int64 { return b.allocSum.Value() }

// Available is the room left: the limit less the allocation, never below 0.
func (b *Bucket) Available() int64 { return quota.Room(b.Limit(), b.Allocated()) }

// Dims are the dimensions the bucket covers; none for the overall bucket.
func (b *Bucket) Dims() quota.Dimensions { return b.dims }

func (b *Bucket) setGrant(uid string, c quota.GrantContribution) {
	old, i, ok := b.grant(uid)
	b.limitSum.Sub(old.Amount)
	b.limitSum.Add(c.Amount)
	if ok {
		b.grants[i].c = c
		return
	}
	b.grants = append(b.grants, bucketGrant{uid: uid, c: c})
	switch {
	case b.byUID != nil:
		b.byUID[uid] = len(b.grants) - 1
	case len(b.grants) > indexGrantsAbove:
		b.byUID = make(map[string]int, len(b.grants))
		for i, g := range b.grants {
			b.byUID[g.uid] = i
		}
	}
}

func (b *Bucket) removeGrant(uid string) bool {
	c, i, ok := b.grant(uid)
	if !ok {
		return false
	}
	b.limitSum.Sub(c.Amount)
	last := len(b.grants) - 1
	b.grants[i] = b.grants[last]
	b.grants[last] = bucketGrant{}
	b.grants = b.grants[:last]
	if b.byUID != nil {
		delete(b.byUID, uid)
		if i < last {
			b.byUID[b.grants[i].uid] = i
		}
	}
	return true
}

// Reserve makes room for n more grants and series more series: a rebuild
// that knows how many are coming adds them without the maps rehashing their
// way there.
func (bk *Books) Reserve(grants, series int) {
	bk.grants = Grown(bk.grants, grants)
	bk.grantValid = Grown(bk.grantValid, grants)
	bk.phases = Grown(bk.phases, grants)
	bk.series = Grown(bk.series, series)
}

// New returns empty books.
func New() *Books {
	return &Books{
		regs:           map[string]quota.Registration{},
		active:         map[string]string{},
		grants:         map[string]quota.Grant{},
		grantValid:     map[string]quota.Validity{},
		phases:         map[string]quota.Phase{},
		series:         map[Key]*Series{},
		changedBuckets: map[bucketRef]struct{}{},
		changedGrants:  map[string]struct{}{},
		changedRegs:    map[string]struct{}{},
		holds:          map[string]budgetHold{},
	}
}
