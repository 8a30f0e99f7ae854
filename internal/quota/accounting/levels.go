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
	old, had := e.info[id]
	if had && sameInfo(old, info) {
		return
	}
	if had && old.Parent != nil {
		e.unlinkChild(*old.Parent, id)
	}
	if info.Parent != nil {
		set := e.children[*info.Parent]
		if set == nil {
			set = map[quota.ConsumerID]struct{}{}
			e.children[*info.Parent] = set
		}
		set[id] = struct{}{}
	}
	e.info[id] = info
	e.membershipChanged(id)
	e.consumerChanged(id)
}

func (e *Accounts) unlinkChild(parent, id quota.ConsumerID) {
	if set := e.children[parent]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(e.children, parent)
		}
	}
}

// beneath calls do for c and every consumer beneath it (its children,
// theirs, ... down to maxDepth), each once: what a change of c, or room at
// c, reaches. Its cost is c's subtree, never the other consumers.
func (e *Accounts) beneath(c quota.ConsumerID, seen map[quota.ConsumerID]struct{}, do func(quota.ConsumerID)) {
	level := []quota.ConsumerID{c}
	for depth := 0; depth <= maxDepth && len(level) > 0; depth++ {
		var next []quota.ConsumerID
		for _, x := range level {
			if _, ok := seen[x]; ok {
				continue
			}
			seen[x] = struct{}{}
			e.visits++
			do(x)
			for child := range e.children[x] {
				next = append(next, child)
			}
		}
		level = next
	}
}

// roomGained records that level l gained room or a limit: its waiting
// claims and those beneath it are decided again; at a group, its members'
// and those beneath them (the members index).
func (e *Accounts) roomGained(l quota.ConsumerID) {
	if !l.IsGroup() {
		e.roomAt[l] = struct{}{}
		return
	}
	for _, uid := range e.groups {
		if g, _ := e.books.Grant(uid); g.Consumer == l {
			for m := range e.members[uid] {
				e.roomAt[m] = struct{}{}
			}
		}
	}
}

// hierarchyChanged marks every claim's levels for computing again.
func (e *Accounts) hierarchyChanged() {
	e.levelsStale = true
	e.levelCache = bookkeeping.Fresh(e.levelCache)
	e.levelKeys = bookkeeping.Fresh(e.levelKeys)
}

// consumerChanged marks the levels of the claims of a consumer and of its
// descendants for computing again: only theirs can change with it
// (refreshLevels drops their cached levels, and no other's).
func (e *Accounts) consumerChanged(id quota.ConsumerID) {
	e.changedConsumers[id] = struct{}{}
}

// RemoveConsumer forgets a consumer object (it was deleted).
func (e *Accounts) RemoveConsumer(id quota.ConsumerID) {
	info, ok := e.info[id]
	if !ok {
		return
	}
	if info.Parent != nil {
		e.unlinkChild(*info.Parent, id)
	}
	// Its children still name it: a change reaches them through it.
	delete(e.info, id)
	e.membershipChanged(id)
	e.consumerChanged(id)
}

// groupChanged keeps the list of valid group grants and their members. A
// group created, deleted, or given another selector, kind or resource types
// changes the levels of its members' claims and of those beneath them (the
// claims of the consumers it selects, or selected); a group grant whose
// amounts alone changed changes no levels.
func (e *Accounts) groupChanged(uid string, g quota.Grant, valid bool) {
	i, found := slices.BinarySearch(e.groups, uid)
	isGroup := valid && g.Group != nil
	switch {
	case !isGroup && !found:
		return
	case isGroup && found && e.shapes[uid] == groupShape(g):
		return
	}
	for m := range e.members[uid] {
		e.consumerChanged(m) // selected before
	}
	if !isGroup {
		e.groups = slices.Delete(e.groups, i, i+1)
		delete(e.members, uid)
		delete(e.shapes, uid)
		return
	}
	if !found {
		e.groups = slices.Insert(e.groups, i, uid)
	}
	// Who it selects now: every consumer is matched once, as the group is
	// created or its selector changes (its members are kept from then on).
	set := map[quota.ConsumerID]struct{}{}
	for c := range e.info {
		e.visits++
		if e.selects(g.Group, c) {
			set[c] = struct{}{}
			e.consumerChanged(c)
		}
	}
	e.members[uid] = set
	e.shapes[uid] = groupShape(g)
}

// groupShape is what of a group grant decides which levels claims have:
// its consumer, the kind and selector of the group, its resource types.
func groupShape(g quota.Grant) string {
	var b strings.Builder
	b.WriteString(g.Consumer.String())
	if g.Group != nil {
		b.WriteString("\n" + g.Group.Kind.String() + "\n")
		if g.Group.Selector != nil {
			b.WriteString(g.Group.Selector.String())
		} else {
			b.WriteString("<none>")
		}
	}
	types := make([]string, 0, len(g.Allowances))
	for _, a := range g.Allowances {
		types = append(types, a.ResourceType)
	}
	slices.Sort(types)
	b.WriteString("\n" + strings.Join(types, ","))
	return b.String()
}

// membershipChanged keeps the group members index as consumer id changed
// (created, relabelled, deleted: gone when not in info).
func (e *Accounts) membershipChanged(id quota.ConsumerID) {
	for _, uid := range e.groups {
		g, _ := e.books.Grant(uid)
		set := e.members[uid]
		if set == nil {
			continue
		}
		if e.selects(g.Group, id) {
			set[id] = struct{}{}
		} else {
			delete(set, id)
		}
	}
}

// levelsOf lists the series a request of consumer c for a resource type
// draws from: c's own first, then each ancestor the registration names,
// then each group that selects c or an ancestor.
//
// The lists are cached until the hierarchy changes or a series they name is
// dropped; callers share them and never change them.
func (e *Accounts) levelsOf(c quota.ConsumerID, resourceType string) []*bookkeeping.Series {
	if d := e.books.Drops(); d != e.levelDrops {
		e.levelDrops = d
		e.forgetDropped()
	}
	k := bookkeeping.Key{Consumer: c, ResourceType: resourceType}
	if l, ok := e.levelCache[k]; ok {
		return l
	}
	l := e.computeLevels(c, resourceType)
	e.levelCache[k] = l
	if !slices.Contains(e.levelKeys[c], resourceType) {
		e.levelKeys[c] = append(e.levelKeys[c], resourceType)
	}
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

// forgetDropped drops the cached levels that may name a series the books
// dropped: a series of consumer L is among the levels of L and of the
// consumers beneath it, for its resource type; a group's, of anyone's.
func (e *Accounts) forgetDropped() {
	seen := map[quota.ConsumerID]struct{}{}
	for _, k := range e.books.TakeDropped() {
		if k.Consumer.IsGroup() {
			e.levelCache = bookkeeping.Fresh(e.levelCache)
			e.levelKeys = bookkeeping.Fresh(e.levelKeys)
			return
		}
		clear(seen)
		e.beneath(k.Consumer, seen, func(x quota.ConsumerID) {
			delete(e.levelCache, bookkeeping.Key{Consumer: x, ResourceType: k.ResourceType})
		})
	}
}

// refreshLevels computes every claim's levels again after the hierarchy
// changed, moving granted claims' allocations to their new levels.
func (e *Accounts) refreshLevels() {
	if !e.levelsStale && len(e.changedConsumers) == 0 {
		return
	}
	var left []*bookkeeping.Series
	moved := map[quota.ConsumerID]struct{}{}
	each := func(do func(cs *claimState)) {
		if e.levelsStale {
			for _, cs := range e.claims {
				e.visits++
				do(cs)
			}
			return
		}
		// Only the changed consumers and those beneath them (the
		// children index): a project created, or relabelled, costs its
		// own claims and its descendants', never a walk of every consumer.
		seen := map[quota.ConsumerID]struct{}{}
		for c := range e.changedConsumers {
			e.beneath(c, seen, func(x quota.ConsumerID) {
				for _, rt := range e.levelKeys[x] {
					delete(e.levelCache, bookkeeping.Key{Consumer: x, ResourceType: rt})
				}
				delete(e.levelKeys, x)
				if q := e.consumers[x]; q != nil {
					for _, cs := range q.all {
						do(cs)
					}
				}
			})
		}
	}
	each(func(cs *claimState) {
		moved[cs.claim.Consumer] = struct{}{}
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
					e.roomGained(s.Key().Consumer)
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
	stale := e.levelsStale
	e.levelsStale = false
	e.changedConsumers = bookkeeping.Emptied(e.changedConsumers)
	for _, s := range left {
		e.books.Prune(s) // a series dropped already is left alone
	}
	// Levels may have appeared with room: the claims that moved are
	// decided again (all of them when every claim's levels were computed).
	if stale {
		e.sharedRoom = true
	}
	for c := range moved {
		if _, ok := e.waiters[c]; ok {
			e.dirty[c] = true
		}
	}
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
		for c := range e.members[uid] {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b quota.ConsumerID) int { return strings.Compare(a.String(), b.String()) })
	return slices.Compact(out)
}

// spreadSharedRoom marks for a new decision the consumers with waiting
// claims beneath each level that gained room (roomAt), or every consumer
// with waiting claims after room at a group (sharedRoom).
func (e *Accounts) spreadSharedRoom() {
	if e.sharedRoom {
		e.sharedRoom = false
		e.roomAt = bookkeeping.Emptied(e.roomAt)
		for c := range e.waiters {
			e.visits++
			e.dirty[c] = true
		}
		return
	}
	if len(e.roomAt) == 0 {
		return
	}
	seen := map[quota.ConsumerID]struct{}{}
	for l := range e.roomAt {
		e.beneath(l, seen, func(c quota.ConsumerID) {
			if _, ok := e.waiters[c]; ok {
				e.dirty[c] = true
			}
		})
	}
	e.roomAt = bookkeeping.Emptied(e.roomAt)
}
