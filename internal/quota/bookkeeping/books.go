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
	grants   map[string]quota.GrantContribution // by grant UID
	limitSum quota.Total                        // sum of grants' amounts
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
	b.limitSum.Sub(b.grants[uid].Amount)
	b.limitSum.Add(c.Amount)
	b.grants[uid] = c
}

func (b *Bucket) removeGrant(uid string) bool {
	c, ok := b.grants[uid]
	if ok {
		b.limitSum.Sub(c.Amount)
		delete(b.grants, uid)
	}
	return ok
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
