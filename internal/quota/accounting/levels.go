package accounting

import (
	"maps"
	"slices"
	"strings"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
	"k8s.io/apimachinery/pkg/labels"
)

// A hierarchy of quota: a claim of a consumer draws from its own buckets
// and, in the same all-or-nothing decision, from the buckets of every level
// above it that the resource type's registration names (a Project's
// Organization) and of every group grant that selects it or one of those
// ancestors. A level that has no grant does not limit; a claim none of whose
// levels has a grant is refused with a limit of 0, as a single level always
// was.

// sameInfo reports whether two records of a consumer are the same.
func sameInfo(a, b quota.ConsumerInfo) bool {
	if (a.Parent == nil) != (b.Parent == nil) || (a.Parent != nil && *a.Parent != *b.Parent) {
		return false
	}
	return maps.Equal(a.Labels, b.Labels)
}

// maxDepth bounds a walk up a hierarchy, so that a cycle in what consumers
// name as their parents cannot loop.
const maxDepth = 8

// SetConsumer records a consumer's parent and labels. Claims whose levels
// change with it are moved at the next decision: their allocation leaves
// the levels they no longer draw from and joins the new ones, without a
// check (a group that ends above its limit shows it and revokes nothing).
func (e *Accounts) SetConsumer(id quota.ConsumerID, info quota.ConsumerInfo) {
	if old, ok := e.info[id]; ok && sameInfo(old, info) {
		return
	}
	e.info[id] = info
	e.consumerChanged(id)
}

// hierarchyChanged marks every claim's levels for computing again.
func (e *Accounts) hierarchyChanged() {
	e.levelsStale = true
	clear(e.levelCache)
}

// consumerChanged marks the levels of the claims of a consumer and of its
// descendants for computing again: only theirs can change with it.
func (e *Accounts) consumerChanged(id quota.ConsumerID) {
	e.changedConsumers[id] = struct{}{}
	clear(e.levelCache)
}

// chainChanged reports whether a consumer or one of its ancestors changed
// since the levels were last computed.
func (e *Accounts) chainChanged(c quota.ConsumerID) bool {
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
func (e *Accounts) RemoveConsumer(id quota.ConsumerID) {
	if _, ok := e.info[id]; !ok {
		return
	}
	delete(e.info, id)
	e.consumerChanged(id)
}

// groupChanged keeps the list of valid group grants.
func (e *Accounts) groupChanged(uid string, g quota.Grant, valid bool) {
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
func (e *Accounts) levelsOf(c quota.ConsumerID, resourceType string) []*bookkeeping.Series {
	if d := e.books.Drops(); d != e.levelDrops {
		clear(e.levelCache) // a cached list may name a series the books dropped
		e.levelDrops = d
	}
	k := bookkeeping.Key{Consumer: c, ResourceType: resourceType}
	if l, ok := e.levelCache[k]; ok {
		return l
	}
	l := e.computeLevels(c, resourceType)
	e.levelCache[k] = l
	return l
}

func (e *Accounts) computeLevels(c quota.ConsumerID, resourceType string) []*bookkeeping.Series {
	out := make([]*bookkeeping.Series, 1, 4)
	out[0] = e.books.SeriesFor(bookkeeping.Key{Consumer: c, ResourceType: resourceType})
	reg, ok := e.books.ActiveRegistration(resourceType)
	if !ok || (len(reg.Levels) == 0 && len(e.groups) == 0) {
		return out
	}
	var buf [maxDepth + 1]quota.ConsumerID
	chain := append(buf[:0], c)
	for cur, depth := c, 0; depth < maxDepth; depth++ {
		info, ok := e.info[cur]
		if !ok || info.Parent == nil || slices.Contains(chain, *info.Parent) {
			break
		}
		cur = *info.Parent
		chain = append(chain, cur)
		if slices.Contains(reg.Levels, cur.GroupKind()) {
			out = append(out, e.books.SeriesFor(bookkeeping.Key{Consumer: cur, ResourceType: resourceType}))
		}
	}
	for _, uid := range e.groups {
		g, _ := e.books.Grant(uid)
		if !allows(&g, resourceType) {
			continue
		}
		for _, m := range chain {
			if e.selects(g.Group, m) {
				out = append(out, e.books.SeriesFor(bookkeeping.Key{Consumer: g.Consumer, ResourceType: resourceType}))
				break
			}
		}
	}
	return out
}

// allows reports whether a grant gives quota of a resource type.
func allows(g *quota.Grant, resourceType string) bool {
	for _, a := range g.Allowances {
		if a.ResourceType == resourceType {
			return true
		}
	}
	return false
}

// selects reports whether a group selects a consumer.
func (e *Accounts) selects(g *quota.Group, c quota.ConsumerID) bool {
	if g.Kind != c.GroupKind() {
		return false
	}
	info, ok := e.info[c]
	return ok && g.Selector != nil && g.Selector.Matches(labels.Set(info.Labels))
}

// refreshLevels computes every claim's levels again after the hierarchy
// changed, moving granted claims' allocations to their new levels.
func (e *Accounts) refreshLevels() {
	if !e.levelsStale && len(e.changedConsumers) == 0 {
		return
	}
	var left []*bookkeeping.Series
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
		granted := cs.decision.Outcome == quota.Granted
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
					e.books.Uncharge(s, cs.claim.UID, r)
					e.sharedRoom = true
				}
				s.Unref()
				left = append(left, s)
			}
			for _, s := range now {
				if slices.Contains(was, s) {
					continue
				}
				s.Ref()
				if granted {
					e.books.Charge(s, cs.claim.UID, cs.claim.Cluster, r)
				}
			}
			cs.levels[i] = now
		}
	})
	e.levelsStale = false
	clear(e.changedConsumers)
	for _, s := range left {
		e.books.Prune(s) // a series dropped already is left alone
	}
	// Levels may have appeared with room, or claims may have left a limit.
	e.sharedRoom = true
	// A group's members may have changed: its buckets are written again,
	// with their copies in its members' namespaces.
	for _, uid := range e.groups {
		g, _ := e.books.Grant(uid)
		for _, a := range g.Allowances {
			e.books.TouchAll(bookkeeping.Key{Consumer: g.Consumer, ResourceType: a.ResourceType})
		}
	}
}

// GroupMembers lists the consumers a group grant selects now, in a stable
// order; nil when id is not a valid group.
func (e *Accounts) GroupMembers(id quota.ConsumerID) []quota.ConsumerID {
	var out []quota.ConsumerID
	for _, uid := range e.groups {
		g, _ := e.books.Grant(uid)
		if g.Consumer != id {
			continue
		}
		for c := range e.info {
			if e.selects(g.Group, c) {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b quota.ConsumerID) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// spreadSharedRoom marks every consumer with waiting claims for a new
// decision after a shared level gained room.
func (e *Accounts) spreadSharedRoom() {
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
