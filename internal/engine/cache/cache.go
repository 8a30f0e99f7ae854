package cache

import (
	"runtime"
	"sync"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
)

// Cache is one term's quota state. Create it with New.
type Cache struct {
	mu sync.Mutex
	// acc are the quota accounts: every number comes from here.
	acc   *accounting.Accounts
	ready bool
	// stopped is set when the term ends; admission then stops using it.
	stopped   bool
	claimKeys map[string]string // claim UID → namespace/name
	grantKeys map[string]string // grant UID → namespace/name
	// inflight are the grants recorded in the ledger; projected are those
	// since written to their claims, dropped from the ledger next time.
	inflight  map[string]string
	projected map[string]struct{}
	// ledgerStale: the ledger lists grants already written (trimmed at the
	// next record). blocked: the in-flight bound held decisions back.
	ledgerStale bool
	blocked     bool
	firstSeen   map[string]time.Time
	// pending are grants made at admission whose claims are not created
	// yet, by claim namespace/name; each is held in the accounts under a
	// provisional ID until its claim exists.
	pending map[string]*formats.PendingClaim
	// pendingByObject are the keys of pending, by object UID.
	pendingByObject map[string]map[string]struct{}
	// updating marks an object whose update is being decided, with a token
	// of that decision.
	updating  map[string]uint64
	updateSeq uint64
	// objectClaims are the claims policies made, by object UID (claim UID →
	// policy), and claimObject the reverse: what an update replaces.
	// (A list per object, not a map: an object has one claim per policy.)
	objectClaims map[string][]objectClaim
	claimObject  map[string]string
	// replacing are claims a pending update replaces (UID → deleted
	// meanwhile): they count until the update settles.
	replacing map[string]bool
	// budgetHolds are the budget holds kept in the journal, by grant
	// namespace/name.
	budgetHolds map[string]*formats.BudgetHold

	// windows are the windowed grants' phases, by grant UID;
	// windowRecords the phases the ledger holds (or will at its next
	// record) and no grant shows yet; windowsDue those WindowsDue recorded
	// and ApplyWindows has not applied; windowCheck when WindowsDue must
	// look again (zero: at once).
	windows       map[string]*windowState
	windowRecords map[string]formats.WindowRecord
	windowsDue    map[string]quota.Phase
	windowCheck   time.Time

	// trusted says whether a stored Granted status was sealed by an engine.
	trusted func(*quotav1alpha1.ResourceClaim) bool
	// claimStored says whether the claim cache holds namespace/name.
	claimStored func(string) bool
	changed     chan struct{}
}

// New is an empty state. inflight are the grants the ledger holds from
// earlier terms; trusted checks a stored Granted status's seal.
func New(inflight map[string]string, trusted func(*quotav1alpha1.ResourceClaim) bool) *Cache {
	if inflight == nil {
		inflight = map[string]string{}
	}
	return &Cache{
		acc:             accounting.New(),
		claimKeys:       map[string]string{},
		grantKeys:       map[string]string{},
		inflight:        inflight,
		projected:       map[string]struct{}{},
		firstSeen:       map[string]time.Time{},
		pending:         map[string]*formats.PendingClaim{},
		pendingByObject: map[string]map[string]struct{}{},
		updating:        map[string]uint64{},
		objectClaims:    map[string][]objectClaim{},
		claimObject:     map[string]string{},
		replacing:       map[string]bool{},
		budgetHolds:     map[string]*formats.BudgetHold{},
		windows:         map[string]*windowState{},
		windowRecords:   map[string]formats.WindowRecord{},
		windowsDue:      map[string]quota.Phase{},
		trusted:         trusted,
		claimStored:     func(string) bool { return false },
		changed:         make(chan struct{}, 1),
	}
}

// SetClaimLookup tells the cache how to ask whether a claim is stored (the
// claim informer's store), once that exists.
func (c *Cache) SetClaimLookup(stored func(key string) bool) {
	c.mu.Lock()
	c.claimStored = stored
	c.mu.Unlock()
}

// Changed signals, coalesced, that something changed that a decision may
// depend on.
func (c *Cache) Changed() <-chan struct{} { return c.changed }

// Notify signals Changed.
func (c *Cache) Notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Lock takes the cache's lock for several Locked steps.
func (c *Cache) Lock() { c.mu.Lock() }

// Unlock releases it.
func (c *Cache) Unlock() { c.mu.Unlock() }

// AccountsLocked are the quota accounts; the lock must be held while they
// are used.
func (c *Cache) AccountsLocked() *accounting.Accounts { return c.acc }

// Read runs fn on the accounts under the lock; fn must only read.
func (c *Cache) Read(fn func(acc *accounting.Accounts)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.acc)
}

// StoppedLocked reports whether the term ended.
func (c *Cache) StoppedLocked() bool { return c.stopped }

// Stop marks the term ended: admission stops using it.
func (c *Cache) Stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
}

// MarkReady ends the rebuild: from now on new claims' decision latency is
// measured. Grants the ledger holds for claims that no longer exist (deleted
// before their decision was written) are dropped at the next record. It
// returns the number of claims known.
func (c *Cache) MarkReady() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = true
	for uid := range c.inflight {
		if _, ok := c.claimKeys[uid]; !ok {
			c.projected[uid] = struct{}{}
		}
	}
	for uid := range c.windowRecords {
		if _, ok := c.grantKeys[uid]; !ok {
			delete(c.windowRecords, uid) // its grant is gone
			c.ledgerStale = true
		}
	}
	return len(c.claimKeys)
}

// RegistrationChanged learns a registration.
func (c *Cache) RegistrationChanged(r *quotav1alpha1.ResourceRegistration) {
	c.mu.Lock()
	c.acc.UpsertRegistration(convert.Registration(r))
	c.mu.Unlock()
	c.Notify()
}

// RegistrationDeleted forgets a registration.
func (c *Cache) RegistrationDeleted(name string) {
	c.mu.Lock()
	c.acc.RemoveRegistration(name)
	c.mu.Unlock()
	c.Notify()
}

// GrantChanged learns a grant. It reports whether budget holds exist, which
// the grant may have settled.
func (c *Cache) GrantChanged(g *quotav1alpha1.ResourceGrant) (holds bool) {
	qg := convert.Grant(g)
	c.mu.Lock()
	c.upsertGrantLocked(g, qg)
	holds = len(c.budgetHolds) > 0
	c.mu.Unlock()
	c.Notify()
	return holds
}

func (c *Cache) upsertGrantLocked(g *quotav1alpha1.ResourceGrant, qg quota.Grant) {
	c.grantKeys[string(g.UID)] = formats.Key(g.Namespace, g.Name)
	qg.Phase = c.phaseOfLocked(g, qg.Window)
	c.acc.UpsertGrant(qg)
}

// GrantsAdded is GrantChanged for many grants at once: the grant informer's
// first list, as a term starts. They are converted outside the lock, in
// parallel, and the maps are sized for them before they are added.
func (c *Cache) GrantsAdded(gs []*quotav1alpha1.ResourceGrant) (holds bool) {
	qgs := make([]quota.Grant, len(gs))
	levels := 0
	inParallel(len(gs), func(i int) { qgs[i] = convert.Grant(gs[i]) })
	for _, qg := range qgs {
		levels += len(qg.Allowances)
	}
	c.mu.Lock()
	c.grantKeys = bookkeeping.Grown(c.grantKeys, len(gs))
	c.acc.ReserveGrants(len(gs), levels)
	for i, g := range gs {
		c.upsertGrantLocked(g, qgs[i])
	}
	holds = len(c.budgetHolds) > 0
	c.mu.Unlock()
	c.Notify()
	return holds
}

// inParallel calls do for 0..n-1 on GOMAXPROCS goroutines (one for few),
// and returns when every call has.
func inParallel(n int, do func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+255)/256)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				do(i)
			}
		})
	}
	wg.Wait()
}

// GrantDeleted forgets a grant; like GrantChanged it reports whether budget
// holds exist.
func (c *Cache) GrantDeleted(g *quotav1alpha1.ResourceGrant) (holds bool) {
	c.mu.Lock()
	delete(c.grantKeys, string(g.UID))
	c.forgetWindowLocked(string(g.UID))
	c.acc.RemoveGrant(string(g.UID))
	holds = len(c.budgetHolds) > 0
	c.mu.Unlock()
	c.Notify()
	return holds
}

// GrantKey is the namespace/name of a known grant.
func (c *Cache) GrantKey(uid string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grantKeys[uid]
}

// ClaimAdded learns a claim. A claim whose stored status says Granted under
// a valid seal, or that the ledger holds as granted, was granted before and
// is restored as such; any other claim waits for a decision. A claim written
// for an admission grant takes that grant's place. It reports whether the
// claim's status should be written now.
func (c *Cache) ClaimAdded(cl *quotav1alpha1.ResourceClaim) (write bool) {
	uid := string(cl.UID)
	defer c.Notify() // an update's replacement changes buckets too
	// The seal (an HMAC) and the conversion depend on the claim alone.
	qc, sealed := convert.Claim(cl), convert.IsGranted(cl) && c.trusted(cl)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adoptLocked(cl) || c.acc.Knows(uid) {
		return true // write its decision now that the cache has it
	}
	return c.learnLocked(cl, qc, sealed)
}

// learnLocked adds a claim the cache does not know. sealed: its stored
// status is Granted with an engine's seal. It reports whether the claim's
// status must be written.
func (c *Cache) learnLocked(cl *quotav1alpha1.ResourceClaim, qc quota.Claim, sealed bool) (write bool) {
	uid := string(cl.UID)
	c.claimKeys[uid] = formats.Key(cl.Namespace, cl.Name)
	c.indexClaimLocked(cl)
	_, recorded := c.inflight[uid]
	// A Granted status counts only when an engine sealed it; any other is
	// decided again (and its status rewritten), never free quota.
	if sealed || recorded {
		c.acc.RestoreGranted(qc)
		return cl.Status.DecisionSeal == "" // granted before seals existed: seal it now
	}
	c.acc.AddClaim(qc)
	if c.ready {
		c.firstSeen[uid] = time.Now()
	}
	return false
}

// ClaimsAdded is ClaimAdded for many claims at once: an informer's first
// list, as a term starts. What depends on a claim alone (its seal, an HMAC;
// its conversion) is done outside the lock, in parallel, and the maps are
// sized for the claims before they are added. It returns the UIDs of the
// claims whose status must be written.
func (c *Cache) ClaimsAdded(cls []*quotav1alpha1.ResourceClaim) (write []string) {
	if len(cls) == 0 {
		return nil
	}
	defer c.Notify()
	qcs := make([]quota.Claim, len(cls))
	sealed := make([]bool, len(cls))
	inParallel(len(cls), func(i int) {
		qcs[i] = convert.Claim(cls[i])
		sealed[i] = convert.IsGranted(cls[i]) && c.trusted(cls[i])
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claimKeys = bookkeeping.Grown(c.claimKeys, len(cls))
	c.claimObject = bookkeeping.Grown(c.claimObject, len(cls))
	c.objectClaims = bookkeeping.Grown(c.objectClaims, len(cls))
	c.acc.Reserve(len(cls))
	for i, cl := range cls {
		uid := string(cl.UID)
		if c.adoptLocked(cl) || c.acc.Knows(uid) || c.learnLocked(cl, qcs[i], sealed[i]) {
			write = append(write, uid)
		}
	}
	return write
}

// Tracks reports whether a claim UID is known.
func (c *Cache) Tracks(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.claimKeys[uid]
	return ok
}

// ClaimDeleted forgets a claim and releases what it holds, unless a pending
// update replaces it: it then counts until the update settles.
func (c *Cache) ClaimDeleted(cl *quotav1alpha1.ResourceClaim) {
	uid := string(cl.UID)
	c.mu.Lock()
	if _, ok := c.replacing[uid]; ok {
		c.replacing[uid] = true
		c.mu.Unlock()
		return
	}
	c.forgetClaimLocked(uid)
	delete(c.firstSeen, uid)
	// A grant recorded and not yet written has no claim to go to any more:
	// it leaves the ledger with the next record, so deleted claims can
	// never fill the in-flight bound and stop decisions.
	if _, ok := c.inflight[uid]; ok {
		c.projected[uid] = struct{}{}
	}
	c.mu.Unlock()
	c.Notify()
}

func (c *Cache) forgetClaimLocked(uid string) {
	c.acc.RemoveClaim(uid)
	delete(c.claimKeys, uid)
	c.unindexClaimLocked(uid)
}

// ClaimDecision is what the status of a known claim should say.
func (c *Cache) ClaimDecision(uid string) (d quota.Decision, cl quota.Claim, key string, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, known = c.acc.Decision(uid)
	cl, _ = c.acc.Claim(uid)
	return d, cl, c.claimKeys[uid], known
}

// ClaimWritten records that a Granted decision is written to its claim: the
// ledger no longer needs it. It reports whether decisions were held back by
// the in-flight bound (there is room now).
func (c *Cache) ClaimWritten(uid string) (blocked bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.inflight[uid]; ok {
		c.projected[uid] = struct{}{}
	}
	return c.blocked
}

// SetConsumer records a consumer's parent and labels.
func (c *Cache) SetConsumer(id quota.ConsumerID, info quota.ConsumerInfo) {
	c.mu.Lock()
	c.acc.SetConsumer(id, info)
	c.mu.Unlock()
	c.Notify()
}

// RemoveConsumer forgets a consumer's parent and labels.
func (c *Cache) RemoveConsumer(id quota.ConsumerID) {
	c.mu.Lock()
	c.acc.RemoveConsumer(id)
	c.mu.Unlock()
	c.Notify()
}
