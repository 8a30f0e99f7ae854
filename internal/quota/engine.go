package quota

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Engine holds registrations, grants and claims and decides claims. It is
// not safe for concurrent use: the caller serializes access.
type Engine struct {
	regs   map[string]Registration // by name
	active map[string]string       // resourceType → name of the active registration

	grants     map[string]Grant // by UID
	grantValid map[string]Validity

	series    map[seriesKey]*series
	claims    map[string]*claimState // by UID
	consumers map[ConsumerID]*consumerState

	// dirty marks consumers to decide; true when room may have appeared,
	// so that claims already denied are evaluated again.
	dirty          map[ConsumerID]bool
	changedBuckets map[bucketRef]struct{}
	changedGrants  map[string]struct{}
	changedRegs    map[string]struct{}

	// Hierarchy (levels.go): what is known of each consumer object, the
	// valid group grants by UID in a stable order, and whether claims'
	// levels must be computed again.
	info        map[ConsumerID]ConsumerInfo
	groups      []string
	levelsStale bool
	levelCache  map[seriesKey][]*series
	// changedConsumers changed since the levels were computed; the claims
	// of them and their descendants are computed again.
	changedConsumers map[ConsumerID]struct{}
	// sharedRoom: a level shared by several consumers (a parent or a
	// group) gained room or a limit; every waiting claim is decided again.
	sharedRoom bool

	// holds are delegated-budget reservations of grants being admitted
	// (budget.go), by grant namespace/name.
	holds map[string]budgetHold
}

type seriesKey struct {
	Consumer     ConsumerID
	ResourceType string
}

// series is everything of one consumer and one resource type.
type series struct {
	key     seriesKey
	buckets map[string]*bucket    // by Dimensions.Key(); "" is the overall bucket
	list    []*bucket             // the same buckets, for iterating without a map
	granted map[string]grantedReq // by claim UID
	claims  int                   // claims of any outcome that request this resource type
}

// bucketRef names a bucket cheaply (a pointer and a short key) for change
// tracking; the series pointer stays valid after the series is dropped.
type bucketRef struct {
	s   *series
	key string
}

type grantedReq struct {
	amount int64
	dims   Dimensions
}

type bucket struct {
	key      string // dims.Key()
	touched  bool   // in Engine.changedBuckets
	dims     Dimensions
	allocSum total // sum of the granted requests it covers
	claims   int32
	grants   map[string]GrantContribution // by grant UID
	limitSum total                        // sum of grants' amounts
}

func (b *bucket) limit() int64     { return b.limitSum.value() }
func (b *bucket) allocated() int64 { return b.allocSum.value() }
func (b *bucket) available() int64 { return room(b.limit(), b.allocated()) }

func (b *bucket) setGrant(uid string, c GrantContribution) {
	b.limitSum.sub(b.grants[uid].Amount)
	b.limitSum.add(c.Amount)
	b.grants[uid] = c
}

func (b *bucket) removeGrant(uid string) bool {
	c, ok := b.grants[uid]
	if ok {
		b.limitSum.sub(c.Amount)
		delete(b.grants, uid)
	}
	return ok
}

type claimState struct {
	claim    Claim
	decision Decision
	// levels are, per request in request order, the series it draws from:
	// its consumer's first, then its ancestors' and groups' (levels.go).
	levels [][]*series
}

type consumerState struct {
	waiting []*claimState // undecided or denied, in creation order
	claims  int           // claims of this consumer, of any outcome
	all     map[*claimState]struct{}
}

// NewEngine returns an empty engine.
func NewEngine() *Engine {
	return &Engine{
		regs:             map[string]Registration{},
		active:           map[string]string{},
		grants:           map[string]Grant{},
		grantValid:       map[string]Validity{},
		series:           map[seriesKey]*series{},
		claims:           map[string]*claimState{},
		consumers:        map[ConsumerID]*consumerState{},
		dirty:            map[ConsumerID]bool{},
		changedBuckets:   map[bucketRef]struct{}{},
		changedGrants:    map[string]struct{}{},
		changedRegs:      map[string]struct{}{},
		info:             map[ConsumerID]ConsumerInfo{},
		levelCache:       map[seriesKey][]*series{},
		changedConsumers: map[ConsumerID]struct{}{},
		holds:            map[string]budgetHold{},
	}
}

// ---- registrations ----

// UpsertRegistration adds or replaces a registration. Grants and waiting
// claims are validated again.
func (e *Engine) UpsertRegistration(r Registration) {
	e.regs[r.Name] = r
	e.registrationsChanged()
}

// RemoveRegistration forgets a registration.
func (e *Engine) RemoveRegistration(name string) {
	if _, ok := e.regs[name]; !ok {
		return
	}
	delete(e.regs, name)
	delete(e.changedRegs, name)
	e.registrationsChanged()
}

// registrationsChanged recomputes which registration is active for each
// resource type (the oldest; later duplicates are inactive), then every
// grant's validity, and marks every consumer for a new decision.
func (e *Engine) registrationsChanged() {
	names := make([]string, 0, len(e.regs))
	for n := range e.regs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := e.regs[names[i]], e.regs[names[j]]
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Name < b.Name
	})
	active := map[string]string{}
	for _, n := range names {
		r := e.regs[n]
		if _, taken := active[r.ResourceType]; !taken && !r.Deleting {
			active[r.ResourceType] = n
		}
	}
	e.active = active
	e.hierarchyChanged()
	for _, n := range names {
		e.changedRegs[n] = struct{}{}
	}
	for uid, g := range e.grants {
		e.applyGrant(uid, g)
	}
	for c := range e.consumers {
		e.dirty[c] = true
	}
}

// RegistrationValidity says whether a registration is the active one for its
// resource type.
func (e *Engine) RegistrationValidity(name string) Validity {
	r, ok := e.regs[name]
	switch {
	case !ok:
		return Validity{Reason: ReasonRegistrationPending, Cause: CauseNotFound, Message: "registration is not known"}
	case r.Deleting:
		return Validity{Reason: ReasonRegistrationPending, Cause: CauseDeleting, Message: fmt.Sprintf("registration of %s is being deleted; grants and claims of %s are no longer valid", r.ResourceType, r.ResourceType)}
	case e.active[r.ResourceType] != name:
		return Validity{Reason: ReasonValidationFailed, Cause: CauseDuplicateResourceType, Message: fmt.Sprintf("resource type %s is already registered by ResourceRegistration %s; delete this duplicate", r.ResourceType, e.active[r.ResourceType])}
	}
	return Validity{Valid: true, Reason: ReasonRegistrationActive, Message: fmt.Sprintf("%s is registered for %s consumers", r.ResourceType, r.ConsumerType)}
}

// activeRegistration returns the active registration of a resource type.
func (e *Engine) activeRegistration(resourceType string) (Registration, bool) {
	n, ok := e.active[resourceType]
	if !ok {
		return Registration{}, false
	}
	return e.regs[n], true
}

// BaseUnitQuantity is what one base unit of a resource type is as a
// quantity, when its active registration declares it.
func (e *Engine) BaseUnitQuantity(resourceType string) (string, bool) {
	r, ok := e.activeRegistration(resourceType)
	if !ok || r.BaseUnitQuantity == "" {
		return "", false
	}
	return r.BaseUnitQuantity, true
}

// RegistrationUsers counts the grants and claims that use a registration's
// resource type.
func (e *Engine) RegistrationUsers(resourceType string) (grants, claims int) {
	for _, g := range e.grants {
		for _, a := range g.Allowances {
			if a.ResourceType == resourceType {
				grants++
				break
			}
		}
	}
	for k, s := range e.series {
		if k.ResourceType == resourceType {
			claims += s.claims
		}
	}
	return grants, claims
}

// ---- grants ----

// ValidateGrant checks a grant against the active registrations.
func (e *Engine) ValidateGrant(g Grant) Validity {
	seen := map[string]bool{}
	for _, a := range g.Allowances {
		if seen[a.ResourceType] {
			return Validity{Reason: ReasonValidationFailed, Cause: CauseDuplicateResourceType, Message: fmt.Sprintf("resource type %s is listed twice; merge its buckets into one allowance", a.ResourceType)}
		}
		seen[a.ResourceType] = true
		r, ok := e.activeRegistration(a.ResourceType)
		if !ok {
			return Validity{Reason: ReasonValidationFailed, Cause: CauseResourceTypeNotRegistered, Message: fmt.Sprintf("resource type %s is not registered; create a ResourceRegistration for it or fix the allowance", a.ResourceType)}
		}
		if v, ok := grantKindAllowed(g, r); !ok {
			return v
		}
	}
	return Validity{Valid: true, Reason: ReasonGrantActive, Message: "grant is valid and counts towards its consumer's limits"}
}

// UpsertGrant adds or replaces a grant. An invalid grant contributes nothing.
func (e *Engine) UpsertGrant(g Grant) {
	e.grants[g.UID] = g
	e.applyGrant(g.UID, g)
}

// RemoveGrant forgets a grant; its contributions to limits disappear.
func (e *Engine) RemoveGrant(uid string) {
	if _, ok := e.grants[uid]; !ok {
		return
	}
	e.withdrawGrant(uid)
	e.groupChanged(uid, e.grants[uid], false)
	e.dropHoldOf(e.grants[uid])
	delete(e.grants, uid)
	delete(e.grantValid, uid)
	delete(e.changedGrants, uid)
}

// GrantValidity is the validity of a known grant.
func (e *Engine) GrantValidity(uid string) (Validity, bool) {
	v, ok := e.grantValid[uid]
	return v, ok
}

func (e *Engine) applyGrant(uid string, g Grant) {
	e.withdrawGrant(uid)
	v := e.ValidateGrant(g)
	if old, ok := e.grantValid[uid]; !ok || old != v {
		e.changedGrants[uid] = struct{}{}
	}
	e.grantValid[uid] = v
	e.groupChanged(uid, g, v.Valid)
	e.settleHold(g)
	if !v.Valid {
		return
	}
	e.sharedRoom = true
	for _, a := range g.Allowances {
		s := e.seriesFor(seriesKey{g.Consumer, a.ResourceType})
		for _, gb := range a.Buckets {
			b := e.bucketFor(s, gb.Dims)
			c := b.grants[uid]
			c.Namespace, c.Name = g.Namespace, g.Name
			c.Amount = addSat(c.Amount, gb.Amount)
			b.setGrant(uid, c)
			e.touch(s, gb.Dims.Key())
		}
		e.dirty[g.Consumer] = true
	}
}

// withdrawGrant removes every contribution of a grant.
func (e *Engine) withdrawGrant(uid string) {
	old, ok := e.grants[uid]
	if !ok {
		return
	}
	for _, a := range old.Allowances {
		s, ok := e.series[seriesKey{old.Consumer, a.ResourceType}]
		if !ok {
			continue
		}
		for key, b := range s.buckets {
			if b.removeGrant(uid) {
				e.touch(s, key)
			}
		}
		e.prune(s)
	}
}

// ---- series and buckets ----

func (e *Engine) seriesFor(k seriesKey) *series {
	s, ok := e.series[k]
	if !ok {
		s = &series{key: k, buckets: map[string]*bucket{}, granted: map[string]grantedReq{}}
		e.series[k] = s
	}
	if _, ok := s.buckets[""]; !ok {
		b := &bucket{grants: map[string]GrantContribution{}}
		s.buckets[""] = b
		s.list = append(s.list, b)
		e.touch(s, "")
	}
	return s
}

// bucketFor returns the bucket of a dimension set, creating it with the
// allocation of every granted request it covers.
func (e *Engine) bucketFor(s *series, dims Dimensions) *bucket {
	key := dims.Key()
	if b, ok := s.buckets[key]; ok {
		return b
	}
	b := &bucket{key: key, dims: dims, grants: map[string]GrantContribution{}}
	for _, r := range s.granted {
		if dims.SubsetOf(r.dims) {
			b.allocSum.add(r.amount)
			b.claims++
		}
	}
	s.buckets[key] = b
	s.list = append(s.list, b)
	return b
}

// prune drops dimensioned buckets no grant defines any more, and the whole
// series once neither grants nor claims refer to it.
func (e *Engine) prune(s *series) {
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

func (e *Engine) touch(s *series, dimsKey string) {
	e.changedBuckets[bucketRef{s, dimsKey}] = struct{}{}
}

// touchBucket is touch for a bucket that exists, without hashing it again
// while it is marked.
func (e *Engine) touchBucket(s *series, b *bucket) {
	if !b.touched {
		b.touched = true
		e.changedBuckets[bucketRef{s, b.key}] = struct{}{}
	}
}

// Bucket returns the live state of a bucket; false when it does not exist
// (nothing refers to it).
func (e *Engine) Bucket(id BucketID) (BucketStatus, bool) {
	e.refreshLevels()
	s, ok := e.series[seriesKey{id.Consumer, id.ResourceType}]
	if !ok {
		return BucketStatus{}, false
	}
	b, ok := s.buckets[id.Dims]
	if !ok {
		return BucketStatus{}, false
	}
	st := e.bucketStatus(s, b)
	return st, true
}

// BucketIDs lists every existing bucket.
func (e *Engine) BucketIDs() []BucketID {
	e.refreshLevels()
	var ids []BucketID
	for k, s := range e.series {
		for key := range s.buckets {
			ids = append(ids, BucketID{k.Consumer, k.ResourceType, key})
		}
	}
	return ids
}

// TakeChanged returns, and forgets, what changed since the last call:
// buckets (possibly removed), grants and registrations whose validity may
// have changed.
func (e *Engine) TakeChanged() (buckets []BucketID, grants, registrations []string) {
	e.refreshLevels()
	for ref := range e.changedBuckets {
		buckets = append(buckets, BucketID{ref.s.key.Consumer, ref.s.key.ResourceType, ref.key})
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

// ---- claims ----

// AddClaim adds an undecided claim. Adding a known UID is a no-op: a claim's
// requests cannot change.
func (e *Engine) AddClaim(c Claim) {
	if _, ok := e.claims[c.UID]; ok {
		return
	}
	e.refreshLevels()
	cs := &claimState{claim: c, decision: Decision{Outcome: Pending}, levels: make([][]*series, len(c.Requests))}
	e.claims[c.UID] = cs
	for i, r := range c.Requests {
		cs.levels[i] = e.levelsOf(c.Consumer, r.ResourceType)
		for _, s := range cs.levels[i] {
			s.claims++
		}
	}
	q := e.consumers[c.Consumer]
	if q == nil {
		q = &consumerState{all: map[*claimState]struct{}{}}
		e.consumers[c.Consumer] = q
	}
	q.insert(cs)
	q.claims++
	q.all[cs] = struct{}{}
	if !e.dirty[c.Consumer] {
		e.dirty[c.Consumer] = false
	}
}

// RestoreGranted records a claim that was granted before (by this or an
// earlier leader). It is allocated without a check: a grant is never
// revoked, even when the limit has since been lowered.
func (e *Engine) RestoreGranted(c Claim) {
	e.AddClaim(c)
	cs := e.claims[c.UID]
	if cs.decision.Outcome == Granted {
		return
	}
	e.consumers[c.Consumer].remove(cs)
	e.allocate(cs, grantedDecision(c))
}

// RemoveClaim forgets a claim and releases what it holds.
func (e *Engine) RemoveClaim(uid string) {
	cs, ok := e.claims[uid]
	if !ok {
		return
	}
	delete(e.claims, uid)
	c := cs.claim
	if cs.decision.Outcome == Granted {
		e.deallocate(cs)
	} else if q := e.consumers[c.Consumer]; q != nil {
		q.remove(cs)
	}
	for _, ls := range cs.levels {
		for _, s := range ls {
			s.claims--
			e.prune(s)
		}
	}
	if q := e.consumers[c.Consumer]; q != nil {
		delete(q.all, cs)
		if q.claims--; q.claims == 0 {
			delete(e.consumers, c.Consumer)
		}
	}
	if cs.decision.Outcome == Granted {
		e.dirty[c.Consumer] = true
	}
}

// Decision returns the current decision on a claim.
func (e *Engine) Decision(uid string) (Decision, bool) {
	cs, ok := e.claims[uid]
	if !ok {
		return Decision{}, false
	}
	if cs.decision.Outcome == Pending && cs.decision.Requests == nil {
		return pendingDecision(cs.claim), true
	}
	return cs.decision, true
}

// Claim returns a known claim.
func (e *Engine) Claim(uid string) (Claim, bool) {
	cs, ok := e.claims[uid]
	if !ok {
		return Claim{}, false
	}
	return cs.claim, true
}

// Changed is a claim whose decision changed.
type Changed struct {
	UID      string
	Decision Decision
}

// Decide decides, for every consumer whose state changed, its waiting claims
// in creation order. A claim is granted when every request fits in every
// bucket it draws from; then all its requests are allocated at once. A claim
// that does not fit holds nothing and keeps waiting; a later, smaller claim
// may still be granted. Decide returns the claims whose decision changed.
func (e *Engine) Decide() []Changed {
	out, _ := e.DecideUpTo(-1)
	return out
}

// DecideUpTo is Decide granting at most max claims (max < 0: no bound).
// When the bound stops it, more is true and the rest is decided by a later
// call. Callers bound the grants that are recorded but not yet written.
func (e *Engine) DecideUpTo(max int) (out []Changed, more bool) {
	e.refreshLevels()
	e.spreadSharedRoom()
	granted := 0
	for c, roomGained := range e.dirty {
		if max >= 0 && granted >= max {
			return out, true
		}
		delete(e.dirty, c)
		q := e.consumers[c]
		if q == nil {
			continue
		}
		kept := q.waiting[:0]
		stopped := false
		for _, cs := range q.waiting {
			if stopped || (!roomGained && cs.decision.Outcome != Pending) {
				kept = append(kept, cs) // denied before and nothing was freed since, or over the bound
				continue
			}
			d := e.evaluate(cs)
			if d.Outcome == Granted {
				if max >= 0 && granted >= max {
					stopped = true
					kept = append(kept, cs)
					continue
				}
				granted++
				e.allocate(cs, d)
				out = append(out, Changed{cs.claim.UID, d})
				continue
			}
			if !sameDecision(cs.decision, d) {
				out = append(out, Changed{cs.claim.UID, d})
			}
			cs.decision = d
			kept = append(kept, cs)
		}
		clear(q.waiting[len(kept):])
		q.waiting = kept
		if stopped {
			e.dirty[c] = e.dirty[c] || roomGained
			return out, true
		}
	}
	return out, false
}

func (e *Engine) allocate(cs *claimState, d Decision) {
	c := cs.claim
	for i, r := range c.Requests {
		for _, s := range cs.levels[i] {
			e.charge(s, c.UID, r)
		}
	}
	d.Outcome = Granted
	cs.decision = d
}

// charge counts a granted request in every bucket of s that covers it.
func (e *Engine) charge(s *series, uid string, r Request) {
	s.granted[uid] = grantedReq{amount: r.Amount, dims: r.Dims}
	for _, b := range s.list {
		if b.dims.SubsetOf(r.Dims) {
			b.allocSum.add(r.Amount)
			b.claims++
			e.touchBucket(s, b)
		}
	}
}

// uncharge is charge undone.
func (e *Engine) uncharge(s *series, uid string, r Request) {
	delete(s.granted, uid)
	for _, b := range s.list {
		if b.dims.SubsetOf(r.Dims) {
			b.allocSum.sub(r.Amount)
			b.claims--
			e.touchBucket(s, b)
		}
	}
}

// evaluate decides a claim against the current state without changing it.
func (e *Engine) evaluate(cs *claimState) Decision {
	c := cs.claim
	if msg, ok := e.validateClaim(c); !ok {
		return validationFailed(c, msg)
	}
	results := make([]RequestResult, len(c.Requests))
	var firstDenied string
	for i, r := range c.Requests {
		reg, _ := e.activeRegistration(r.ResourceType)
		res := e.check(c, r, reg, cs.levels[i])
		if res.Status == "Denied" && firstDenied == "" {
			firstDenied = res.Message
		}
		results[i] = res
	}
	if firstDenied == "" {
		return Decision{Outcome: Granted, Requests: results}
	}
	for i := range results {
		if results[i].Status == "Granted" {
			results[i].Status, results[i].Reason, results[i].Allocated = "Denied", ReasonClaimDenied, 0
			results[i].Message = "this request fits, but nothing is allocated because another request of the claim exceeds its quota (claims are all or nothing)"
		}
	}
	return Decision{Outcome: QuotaExceeded, Requests: results, Message: firstDenied}
}

// validateClaim checks a claim against the registrations.
func (e *Engine) validateClaim(c Claim) (string, bool) {
	seen := map[string]bool{}
	for _, r := range c.Requests {
		if seen[r.ResourceType] {
			return fmt.Sprintf("resource type %s is requested twice; put the amounts in one request", r.ResourceType), false
		}
		seen[r.ResourceType] = true
		if r.Amount <= 0 {
			return fmt.Sprintf("request for %s asks for %d; amounts must be positive", r.ResourceType, r.Amount), false
		}
		reg, ok := e.activeRegistration(r.ResourceType)
		if !ok {
			return fmt.Sprintf("resource type %s is not registered; create a ResourceRegistration for it or fix the request", r.ResourceType), false
		}
		if (GroupKind{c.Consumer.APIGroup, c.Consumer.Kind}) != reg.ConsumerType {
			return fmt.Sprintf("consumer %s cannot claim %s: ResourceRegistration %s charges %s consumers", c.Consumer, r.ResourceType, reg.Name, reg.ConsumerType), false
		}
		if c.ResourceRef != nil {
			allowed := false
			for _, gk := range reg.Claiming {
				if gk == *c.ResourceRef {
					allowed = true
					break
				}
			}
			if !allowed {
				names := make([]string, len(reg.Claiming))
				for i, gk := range reg.Claiming {
					names[i] = gk.String()
				}
				return fmt.Sprintf("%s objects may not claim %s; ResourceRegistration %s allows only %s", c.ResourceRef, r.ResourceType, reg.Name, strings.Join(names, ", ")), false
			}
		}
	}
	return "", true
}

func (q *consumerState) insert(cs *claimState) {
	i := sort.Search(len(q.waiting), func(i int) bool { return before(cs.claim, q.waiting[i].claim) })
	q.waiting = append(q.waiting, nil)
	copy(q.waiting[i+1:], q.waiting[i:])
	q.waiting[i] = cs
}

func (q *consumerState) remove(cs *claimState) {
	for i, w := range q.waiting {
		if w == cs {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return
		}
	}
}

// before orders claims by creation time, then namespace, name and UID.
func before(a, b Claim) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return a.UID < b.UID
}

// Waiting counts claims that are not granted.
func (e *Engine) Waiting() int {
	n := 0
	for _, q := range e.consumers {
		n += len(q.waiting)
	}
	return n
}

// Claims counts known claims.
func (e *Engine) Claims() int { return len(e.claims) }

// DecideTogether decides several waiting claims as one: all are granted, or
// none is and none holds anything. Admission uses it when several policies
// apply to one create. It returns each claim's decision and whether all were
// granted.
func (e *Engine) DecideTogether(uids []string) (map[string]Decision, bool) {
	e.refreshLevels()
	out := make(map[string]Decision, len(uids))
	var done []*claimState
	ok := true
	for _, uid := range uids {
		cs, known := e.claims[uid]
		if !known {
			return out, false
		}
		if cs.decision.Outcome == Granted {
			out[uid] = cs.decision
			continue
		}
		d := e.evaluate(cs)
		out[uid] = d
		if d.Outcome != Granted {
			ok = false
			cs.decision = d
			break
		}
		e.consumers[cs.claim.Consumer].remove(cs)
		e.allocate(cs, d)
		done = append(done, cs)
	}
	if ok {
		return out, true
	}
	for _, cs := range done { // undo: nothing is held unless everything is
		e.deallocate(cs)
		e.consumers[cs.claim.Consumer].insert(cs)
		cs.decision = Decision{Outcome: QuotaExceeded, Message: "another claim of the same create exceeds its quota; nothing is allocated", Requests: cs.decision.Requests}
		out[cs.claim.UID] = cs.decision
	}
	return out, false
}

func (e *Engine) deallocate(cs *claimState) {
	c := cs.claim
	for i, r := range c.Requests {
		for j, s := range cs.levels[i] {
			e.uncharge(s, c.UID, r)
			if j > 0 {
				e.sharedRoom = true
			}
		}
	}
}

// Knows reports whether a claim is known.
func (e *Engine) Knows(uid string) bool {
	_, ok := e.claims[uid]
	return ok
}

// IsRegistered reports whether a resource type has an active registration.
func (e *Engine) IsRegistered(resourceType string) bool {
	_, ok := e.active[resourceType]
	return ok
}

// Rekey renames a claim: admission decides a claim before its object
// exists, under a provisional ID, and renames it to the UID it gets when it
// is created. The allocation moves with it.
func (e *Engine) Rekey(old, uid string) bool {
	cs, ok := e.claims[old]
	if !ok || old == uid {
		return ok
	}
	if _, taken := e.claims[uid]; taken {
		return false
	}
	delete(e.claims, old)
	cs.claim.UID = uid
	e.claims[uid] = cs
	for _, ls := range cs.levels {
		for _, s := range ls {
			if g, ok := s.granted[old]; ok {
				delete(s.granted, old)
				s.granted[uid] = g
			}
		}
	}
	return true
}
