package engine

import (
	"slices"
	"sync"

	"github.com/quotaplane/quotaplane/internal/engine/hierarchy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// existenceKinds are the consumer kinds whose objects the engine knows
// exist, so that a grant naming one that does not says so (its
// status.consumerState and its Active condition's message).
func existenceKinds() []quota.GroupKind {
	return []quota.GroupKind{
		{Group: quota.OrganizationGroup, Kind: "Organization"},
		{Group: quota.OrganizationGroup, Kind: "Project"},
		{Kind: "Namespace"},
	}
}

// consumerDirectory is told every consumer object of the hierarchy's kinds
// and of existenceKinds (hierarchy.Watch). It passes those of the
// hierarchy's kinds on to the cache, and remembers which exist.
type consumerDirectory struct {
	next hierarchy.Consumers
	// hierarchyKinds are passed on to next: the others are watched for
	// their existence only.
	hierarchyKinds map[quota.GroupKind]bool
	// changed is called when a consumer appears or goes.
	changed func(quota.ConsumerID)

	mu    sync.RWMutex
	names map[quota.GroupKind]map[string]struct{}
}

func newConsumerDirectory(next hierarchy.Consumers, relations []hierarchy.ParentRelation, changed func(quota.ConsumerID)) *consumerDirectory {
	d := &consumerDirectory{next: next, hierarchyKinds: map[quota.GroupKind]bool{}, changed: changed, names: map[quota.GroupKind]map[string]struct{}{}}
	for _, rel := range relations {
		d.hierarchyKinds[rel.Child], d.hierarchyKinds[rel.Parent] = true, true
	}
	return d
}

func kindOf(id quota.ConsumerID) quota.GroupKind {
	return quota.GroupKind{Group: id.APIGroup, Kind: id.Kind}
}

// SetConsumer implements hierarchy.Consumers.
func (d *consumerDirectory) SetConsumer(id quota.ConsumerID, info quota.ConsumerInfo) {
	gk := kindOf(id)
	if d.hierarchyKinds[gk] {
		d.next.SetConsumer(id, info)
	}
	d.mu.Lock()
	set := d.names[gk]
	if set == nil {
		set = map[string]struct{}{}
		d.names[gk] = set
	}
	_, had := set[id.Name]
	set[id.Name] = struct{}{}
	d.mu.Unlock()
	if !had && d.changed != nil {
		d.changed(id)
	}
}

// RemoveConsumer implements hierarchy.Consumers.
func (d *consumerDirectory) RemoveConsumer(id quota.ConsumerID) {
	gk := kindOf(id)
	if d.hierarchyKinds[gk] {
		d.next.RemoveConsumer(id)
	}
	d.mu.Lock()
	delete(d.names[gk], id.Name)
	d.mu.Unlock()
	if d.changed != nil {
		d.changed(id)
	}
}

// Lookup says whether a consumer exists; watched is false for a kind whose
// objects the engine does not watch (or that is not served). names are
// those of its kind that exist, for the nearest.
func (d *consumerDirectory) Lookup(id quota.ConsumerID) (exists, watched bool, names []string) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	set, watched := d.names[kindOf(id)]
	if !watched {
		return false, false, nil
	}
	if _, exists = set[id.Name]; exists {
		return true, true, nil
	}
	names = make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	return false, true, names
}

// Watching implements hierarchy.KindWatcher: a served kind with no object
// yet is known to have none.
func (d *consumerDirectory) Watching(gk quota.GroupKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.names[gk] == nil {
		d.names[gk] = map[string]struct{}{}
	}
}
