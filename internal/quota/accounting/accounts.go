package accounting

import "github.com/quotaplane/quotaplane/internal/quota"

// Accounts holds registrations, grants and claims and decides claims. It is
// not safe for concurrent use: the caller serializes access.
type Accounts struct {
	regs   map[string]quota.Registration // by name
	active map[string]string             // resourceType → name of the active registration

	grants     map[string]quota.Grant // by UID
	grantValid map[string]quota.Validity

	series    map[seriesKey]*series
	claims    map[string]*claimState // by UID
	consumers map[quota.ConsumerID]*consumerState

	// dirty marks consumers to decide; true when room may have appeared,
	// so that claims already denied are evaluated again.
	dirty          map[quota.ConsumerID]bool
	changedBuckets map[bucketRef]struct{}
	changedGrants  map[string]struct{}
	changedRegs    map[string]struct{}

	// Hierarchy (levels.go): what is known of each consumer object, the
	// valid group grants by UID in a stable order, and whether claims'
	// levels must be computed again.
	info        map[quota.ConsumerID]quota.ConsumerInfo
	groups      []string
	levelsStale bool
	levelCache  map[seriesKey][]*series
	// changedConsumers changed since the levels were computed; the claims
	// of them and their descendants are computed again.
	changedConsumers map[quota.ConsumerID]struct{}
	// sharedRoom: a level shared by several consumers (a parent or a
	// group) gained room or a limit; every waiting claim is decided again.
	sharedRoom bool

	// holds are delegated-budget reservations of grants being admitted
	// (budget.go), by grant namespace/name.
	holds map[string]budgetHold
}

type seriesKey struct {
	Consumer     quota.ConsumerID
	ResourceType string
}

// series is everything of one consumer and one resource type.
type series struct {
	key     seriesKey
	buckets map[string]*bucket    // by Dimensions.Key(); "" is the overall bucket
	list    []*bucket             // the same buckets, for iterating without a map
	granted map[string]grantedReq // by claim UID
	claims  int                   // claims of any outcome that request this resource type
	// clustered counts granted requests of member clusters' objects.
	clustered int
}

// bucketRef names a bucket cheaply (a pointer and a short key) for change
// tracking; the series pointer stays valid after the series is dropped.
type bucketRef struct {
	s   *series
	key string
}

type grantedReq struct {
	amount  int64
	dims    quota.Dimensions
	cluster string // the member cluster of the claim's object, "" for none
}

type bucket struct {
	key      string // dims.Key()
	touched  bool   // in Accounts.changedBuckets
	dims     quota.Dimensions
	allocSum quota.Total // sum of the granted requests it covers
	claims   int32
	grants   map[string]quota.GrantContribution // by grant UID
	limitSum quota.Total                        // sum of grants' amounts
}

func (b *bucket) limit() int64     { return b.limitSum.Value() }
func (b *bucket) allocated() int64 { return b.allocSum.Value() }
func (b *bucket) available() int64 { return quota.Room(b.limit(), b.allocated()) }

func (b *bucket) setGrant(uid string, c quota.GrantContribution) {
	b.limitSum.Sub(b.grants[uid].Amount)
	b.limitSum.Add(c.Amount)
	b.grants[uid] = c
}

func (b *bucket) removeGrant(uid string) bool {
	c, ok := b.grants[uid]
	if ok {
		b.limitSum.Sub(c.Amount)
		delete(b.grants, uid)
	}
	return ok
}

type claimState struct {
	claim    quota.Claim
	decision quota.Decision
	// levels are, per request in request order, the series it draws from:
	// its consumer's first, then its ancestors' and groups' (levels.go).
	levels [][]*series
}

type consumerState struct {
	waiting []*claimState // undecided or denied, in creation order
	claims  int           // claims of this consumer, of any outcome
	all     map[*claimState]struct{}
}

// New returns an empty engine.
func New() *Accounts {
	return &Accounts{
		regs:             map[string]quota.Registration{},
		active:           map[string]string{},
		grants:           map[string]quota.Grant{},
		grantValid:       map[string]quota.Validity{},
		series:           map[seriesKey]*series{},
		claims:           map[string]*claimState{},
		consumers:        map[quota.ConsumerID]*consumerState{},
		dirty:            map[quota.ConsumerID]bool{},
		changedBuckets:   map[bucketRef]struct{}{},
		changedGrants:    map[string]struct{}{},
		changedRegs:      map[string]struct{}{},
		info:             map[quota.ConsumerID]quota.ConsumerInfo{},
		levelCache:       map[seriesKey][]*series{},
		changedConsumers: map[quota.ConsumerID]struct{}{},
		holds:            map[string]budgetHold{},
	}
}
