package accounting

import (
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
)

// Accounts holds registrations, grants and claims and decides claims. It is
// not safe for concurrent use: the caller serializes access.
type Accounts struct {
	// books keep registrations, grants, buckets and budgets (books.go);
	// Accounts tells them what each claim draws from and holds.
	books *bookkeeping.Books

	claims    map[string]*claimState // by UID
	consumers map[quota.ConsumerID]*consumerState

	// dirty marks consumers to decide; true when room may have appeared,
	// so that claims already denied are evaluated again.
	dirty map[quota.ConsumerID]bool

	// Hierarchy (levels.go): what is known of each consumer object, the
	// valid group grants by UID in a stable order, and whether claims'
	// levels must be computed again.
	info   map[quota.ConsumerID]quota.ConsumerInfo
	groups []string
	// members index the consumers each valid group grant selects, by grant
	// UID, kept as consumers change (SetConsumer, RemoveConsumer); shapes
	// are what of each group grant decides its levels (groupShape).
	members     map[string]map[quota.ConsumerID]struct{}
	shapes      map[string]string
	levelsStale bool
	levelCache  map[bookkeeping.Key][]*bookkeeping.Series
	// levelDrops is the books' Drops() when levelCache was last cleared:
	// once it differs, a cached list may name a series that is gone.
	levelDrops uint64
	// changedConsumers changed since the levels were computed; the claims
	// of them and their descendants are computed again.
	changedConsumers map[quota.ConsumerID]struct{}
	// sharedRoom: every claim's levels were computed again (a registration
	// changed); every consumer with waiting claims is decided again.
	sharedRoom bool
	// roomAt are the levels that gained room or a limit since the last
	// decision: the consumers beneath them (children) with waiting claims
	// are decided again, and no other.
	roomAt map[quota.ConsumerID]struct{}
	// children index each consumer's children (their info's Parent): what
	// a changed consumer, or room at a level, reaches.
	children map[quota.ConsumerID]map[quota.ConsumerID]struct{}
	// waiters are the consumers with waiting claims; waitingClaims counts
	// those claims. Both are kept as claims move (wait, unwait).
	waiters       map[quota.ConsumerID]struct{}
	waitingClaims int
	// waitersPeak and dirtyPeak are the most waiters and dirty held since
	// they were last made anew.
	waitersPeak, dirtyPeak int
	// levelKeys are the resource types levelCache holds for a consumer, so
	// that a changed consumer drops its own entries, not the whole cache.
	levelKeys map[quota.ConsumerID][]string
	// visits counts the consumers and claims the operations look at: what
	// TestNothingUnderTheLockWalksEveryConsumer holds to their own
	// subtrees, whatever the number of consumers.
	visits uint64
}

type claimState struct {
	claim    quota.Claim
	decision quota.Decision
	// levels are, per request in request order, the series it draws from:
	// its consumer's first, then its ancestors' and groups' (levels.go).
	levels [][]*bookkeeping.Series
	// at is the claim's index in its consumer's all.
	at int
}

type consumerState struct {
	waiting []*claimState // undecided or denied, in creation order
	claims  int           // claims of this consumer, of any outcome
	// all are the consumer's claims, in no order (a slice: a map per
	// consumer cost more than the claims' own state).
	all []*claimState
}

// Reserve makes room for n more claims: a rebuild that knows how many are
// coming adds them without the maps rehashing their way there.
func (e *Accounts) Reserve(n int) { e.claims = bookkeeping.Grown(e.claims, n) }

// ReserveGrants makes room for n more grants giving quota at about levels
// consumers' levels (their allowances), as Reserve does for claims.
func (e *Accounts) ReserveGrants(n, levels int) { e.books.Reserve(n, levels) }

// New returns an empty engine.
func New() *Accounts {
	return &Accounts{
		books:            bookkeeping.New(),
		claims:           map[string]*claimState{},
		consumers:        map[quota.ConsumerID]*consumerState{},
		dirty:            map[quota.ConsumerID]bool{},
		info:             map[quota.ConsumerID]quota.ConsumerInfo{},
		levelCache:       map[bookkeeping.Key][]*bookkeeping.Series{},
		changedConsumers: map[quota.ConsumerID]struct{}{},
		roomAt:           map[quota.ConsumerID]struct{}{},
		children:         map[quota.ConsumerID]map[quota.ConsumerID]struct{}{},
		waiters:          map[quota.ConsumerID]struct{}{},
		levelKeys:        map[quota.ConsumerID][]string{},
		members:          map[string]map[quota.ConsumerID]struct{}{},
		shapes:           map[string]string{},
	}
}
