package quota

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// A hierarchy of quota: a claim of a consumer draws from its own buckets
// and, in the same all-or-nothing decision, from the buckets of every level
// above it that the resource type's registration names (a Project's
// Organization) and of every group grant that selects it or one of those
// ancestors. A level that has no grant does not limit; a claim none of whose
// levels has a grant is refused with a limit of 0, as a single level always
// was.

// ConsumerInfo is what the engine knows of a consumer object.
type ConsumerInfo struct {
	// Parent is the consumer one level up, nil at the top.
	Parent *ConsumerID
	// Labels are the consumer's labels, which groups select on.
	Labels map[string]string
}

func (a ConsumerInfo) equal(b ConsumerInfo) bool {
	if (a.Parent == nil) != (b.Parent == nil) || (a.Parent != nil && *a.Parent != *b.Parent) {
		return false
	}
	return maps.Equal(a.Labels, b.Labels)
}

// maxDepth bounds a walk up a hierarchy, so that a cycle in what consumers
// name as their parents cannot loop.
const maxDepth = 8

// GroupAPIGroup and GroupKindName identify a group in a bucket's consumer:
// a group is its ResourceGrant.
const (
	GroupAPIGroup = "quota.miloapis.com"
	GroupKindName = "ResourceGrant"
)

// GroupID is the consumer identity of a group grant's buckets.
func GroupID(namespace, name string) ConsumerID {
	return ConsumerID{APIGroup: GroupAPIGroup, Kind: GroupKindName, Namespace: namespace, Name: name}
}

// IsGroup reports whether a consumer identity is a group's.
func (c ConsumerID) IsGroup() bool { return c.APIGroup == GroupAPIGroup && c.Kind == GroupKindName }

// LevelName is how messages name a level: "Project web", "group team-data".
func (c ConsumerID) LevelName() string {
	if c.IsGroup() {
		return "group " + c.Name
	}
	return c.Kind + " " + c.Name
}

func (c ConsumerID) groupKind() GroupKind { return GroupKind{c.APIGroup, c.Kind} }

// SetConsumer records a consumer's parent and labels. Claims whose levels
// change with it are moved at the next decision: their allocation leaves
// the levels they no longer draw from and joins the new ones, without a
// check (a group that ends above its limit shows it and revokes nothing).
func (e *Engine) SetConsumer(id ConsumerID, info ConsumerInfo) {
	if old, ok := e.info[id]; ok && old.equal(info) {
		return
	}
	e.info[id] = info
	e.consumerChanged(id)
}

// hierarchyChanged marks every claim's levels for computing again.
func (e *Engine) hierarchyChanged() {
	e.levelsStale = true
	clear(e.levelCache)
}

// consumerChanged marks the levels of the claims of a consumer and of its
// descendants for computing again: only theirs can change with it.
func (e *Engine) consumerChanged(id ConsumerID) {
	e.changedConsumers[id] = struct{}{}
	clear(e.levelCache)
}

// chainChanged reports whether a consumer or one of its ancestors changed
// since the levels were last computed.
func (e *Engine) chainChanged(c ConsumerID) bool {
	for depth := 0; depth <= maxDepth; depth++ {
		if _, ok := e.changedConsumers[c]; ok {
			return true
		}
		info, ok := e.info[c]
		if !ok || info.Parent == nil {
			return false
		}
		c = *info.Parent
	}
	return false
}

// RemoveConsumer forgets a consumer object (it was deleted).
func (e *Engine) RemoveConsumer(id ConsumerID) {
	if _, ok := e.info[id]; !ok {
		return
	}
	delete(e.info, id)
	e.consumerChanged(id)
}

// grantKindAllowed checks that a grant's consumer (or, for a group, the
// kind it selects) is a kind the registration charges at some level.
func grantKindAllowed(g Grant, r Registration) (Validity, bool) {
	kind := g.Consumer.groupKind()
	if g.Group != nil {
		kind = g.Group.Kind
	}
	if kind == r.ConsumerType || slices.Contains(r.Levels, kind) {
		return Validity{}, true
	}
	what := fmt.Sprintf("consumer %s", g.Consumer)
	if g.Group != nil {
		what = fmt.Sprintf("a group of %s consumers", kind)
	}
	levels := r.ConsumerType.String()
	if len(r.Levels) > 0 {
		names := []string{levels}
		for _, l := range r.Levels {
			names = append(names, l.String())
		}
		return Validity{Reason: ReasonValidationFailed, Cause: CauseConsumerTypeMismatch, Message: fmt.Sprintf("%s cannot receive %s: ResourceRegistration %s grants it to %s consumers (spec.consumerType and spec.parentConsumerTypes)",
			what, r.ResourceType, r.Name, strings.Join(names, ", "))}, false
	}
	return Validity{Reason: ReasonValidationFailed, Cause: CauseConsumerTypeMismatch, Message: fmt.Sprintf("%s cannot receive %s: ResourceRegistration %s grants it to %s consumers", what, r.ResourceType, r.Name, levels)}, false
}

// groupChanged keeps the list of valid group grants.
func (e *Engine) groupChanged(uid string, g Grant, valid bool) {
	i, found := slices.BinarySearch(e.groups, uid)
	isGroup := valid && g.Group != nil
	switch {
	case isGroup && !found:
		e.groups = slices.Insert(e.groups, i, uid)
	case !isGroup && found:
		e.groups = slices.Delete(e.groups, i, i+1)
	case !isGroup:
		return
	}
	e.hierarchyChanged()
}

// levelsOf lists the series a request of consumer c for a resource type
// draws from: c's own first, then each ancestor the registration names,
// then each group that selects c or an ancestor.
//
// The lists are cached until the hierarchy changes or a series they name is
// dropped; callers share them and never change them.
func (e *Engine) levelsOf(c ConsumerID, resourceType string) []*series {
	k := seriesKey{c, resourceType}
	if l, ok := e.levelCache[k]; ok {
		return l
	}
	l := e.computeLevels(c, resourceType)
	e.levelCache[k] = l
	return l
}

func (e *Engine) computeLevels(c ConsumerID, resourceType string) []*series {
	out := make([]*series, 1, 4)
	out[0] = e.seriesFor(seriesKey{c, resourceType})
	reg, ok := e.activeRegistration(resourceType)
	if !ok || (len(reg.Levels) == 0 && len(e.groups) == 0) {
		return out
	}
	var buf [maxDepth + 1]ConsumerID
	chain := append(buf[:0], c)
	for cur, depth := c, 0; depth < maxDepth; depth++ {
		info, ok := e.info[cur]
		if !ok || info.Parent == nil || slices.Contains(chain, *info.Parent) {
			break
		}
		cur = *info.Parent
		chain = append(chain, cur)
		if slices.Contains(reg.Levels, cur.groupKind()) {
			out = append(out, e.seriesFor(seriesKey{cur, resourceType}))
		}
	}
	for _, uid := range e.groups {
		g := e.grants[uid]
		if !g.allows(resourceType) {
			continue
		}
		for _, m := range chain {
			if e.selects(g.Group, m) {
				out = append(out, e.seriesFor(seriesKey{g.Consumer, resourceType}))
				break
			}
		}
	}
	return out
}

func (g *Grant) allows(resourceType string) bool {
	for _, a := range g.Allowances {
		if a.ResourceType == resourceType {
			return true
		}
	}
	return false
}

// selects reports whether a group selects a consumer.
func (e *Engine) selects(g *Group, c ConsumerID) bool {
	if g.Kind != c.groupKind() {
		return false
	}
	info, ok := e.info[c]
	return ok && g.Selector != nil && g.Selector.Matches(labels.Set(info.Labels))
}

// refreshLevels computes every claim's levels again after the hierarchy
// changed, moving granted claims' allocations to their new levels.
func (e *Engine) refreshLevels() {
	if !e.levelsStale && len(e.changedConsumers) == 0 {
		return
	}
	var left []*series
	each := func(do func(cs *claimState)) {
		if e.levelsStale {
			for _, cs := range e.claims {
				do(cs)
			}
			return
		}
		// Only consumers whose chain changed: a project created, or
		// relabelled, costs its own claims, not every claim's.
		for c, q := range e.consumers {
			if e.chainChanged(c) {
				for cs := range q.all {
					do(cs)
				}
			}
		}
	}
	each(func(cs *claimState) {
		granted := cs.decision.Outcome == Granted
		for i, r := range cs.claim.Requests {
			now := e.levelsOf(cs.claim.Consumer, r.ResourceType)
			was := cs.levels[i]
			if slices.Equal(now, was) {
				continue
			}
			for _, s := range was {
				if slices.Contains(now, s) {
					continue
				}
				if granted {
					e.uncharge(s, cs.claim.UID, r)
					e.sharedRoom = true
				}
				s.claims--
				left = append(left, s)
			}
			for _, s := range now {
				if slices.Contains(was, s) {
					continue
				}
				s.claims++
				if granted {
					e.charge(s, cs.claim.UID, r)
				}
			}
			cs.levels[i] = now
		}
	})
	e.levelsStale = false
	clear(e.changedConsumers)
	for _, s := range left {
		if e.series[s.key] == s {
			e.prune(s)
		}
	}
	// Levels may have appeared with room, or claims may have left a limit.
	e.sharedRoom = true
	// A group's members may have changed: its buckets are written again,
	// with their copies in its members' namespaces.
	for _, uid := range e.groups {
		g := e.grants[uid]
		for _, a := range g.Allowances {
			if s, ok := e.series[seriesKey{g.Consumer, a.ResourceType}]; ok {
				for key := range s.buckets {
					e.touch(s, key)
				}
			}
		}
	}
}

// GroupMembers lists the consumers a group grant selects now, in a stable
// order; nil when id is not a valid group.
func (e *Engine) GroupMembers(id ConsumerID) []ConsumerID {
	var out []ConsumerID
	for _, uid := range e.groups {
		g := e.grants[uid]
		if g.Consumer != id {
			continue
		}
		for c := range e.info {
			if e.selects(g.Group, c) {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b ConsumerID) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// spreadSharedRoom marks every consumer with waiting claims for a new
// decision after a shared level gained room.
func (e *Engine) spreadSharedRoom() {
	if !e.sharedRoom {
		return
	}
	e.sharedRoom = false
	for c, q := range e.consumers {
		if len(q.waiting) > 0 {
			e.dirty[c] = true
		}
	}
}

// hasGrant reports whether any grant gives quota at this level: the
// overall bucket has one, or a dimensioned bucket exists (prune drops those
// no grant defines).
func (s *series) hasGrant() bool {
	return len(s.buckets[""].grants) > 0 || len(s.buckets) > 1
}

// short returns the first bucket (by dimension key) of s that covers r and
// has less room than r asks, nil when r fits.
func (s *series) short(r Request) *bucket {
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
func (s *series) tightest(r Request) *bucket {
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

func (e *Engine) bucketStatus(s *series, b *bucket) BucketStatus {
	st := BucketStatus{ID: BucketID{s.key.Consumer, s.key.ResourceType, b.dims.Key()}, Dims: b.dims,
		Limit: b.limit(), Allocated: b.allocated(), Claims: b.claims}
	for _, g := range b.grants {
		st.Grants = append(st.Grants, g)
	}
	slices.SortFunc(st.Grants, func(x, y GrantContribution) int {
		if c := strings.Compare(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	if !s.hasGrant() {
		reg, _ := e.activeRegistration(s.key.ResourceType)
		st.Unlimited = s.key.Consumer.IsGroup() || len(reg.Levels) > 0
	}
	return st
}

// check decides one request against its levels.
func (e *Engine) check(c Claim, r Request, reg Registration, levels []*series) RequestResult {
	res := RequestResult{ResourceType: r.ResourceType, Bucket: BucketID{c.Consumer, r.ResourceType, ""}}
	refused, limited := -1, false
	for j, s := range levels {
		if !s.hasGrant() {
			continue
		}
		limited = true
		if refused < 0 && s.short(r) != nil {
			refused = j
		}
	}
	if limited && refused < 0 {
		res.Status, res.Reason, res.Allocated = "Granted", ReasonQuotaAvailable, r.Amount
		return res
	}
	if !limited {
		refused = 0 // no grant at any level: the claim's own limit, 0
	}
	res.Status, res.Reason = "Denied", ReasonQuotaExceeded
	for j, s := range levels {
		ls := LevelStatus{Consumer: s.key.Consumer, Limited: s.hasGrant() || j == refused, Refused: j == refused}
		b := s.tightest(r)
		if ls.Refused {
			b = s.short(r)
		}
		if b == nil {
			b = s.buckets[""]
		}
		ls.Bucket = e.bucketStatus(s, b)
		if ls.Refused {
			st := ls.Bucket
			res.Refused = &st
		}
		res.Levels = append(res.Levels, ls)
	}
	others := 0
	for j, ls := range res.Levels {
		if j != refused && ls.Limited {
			others++
		}
	}
	if refused == 0 && others == 0 {
		// One level decided it, as before hierarchies: the message tools
		// and people know.
		s := levels[0]
		b := s.short(r)
		res.Message = exceededMessage(c, r, reg.BaseUnit, BucketID{c.Consumer, r.ResourceType, b.dims.Key()}, b)
		return res
	}
	res.Message = levelsMessage(c, r, reg.BaseUnit, res.Levels)
	return res
}
