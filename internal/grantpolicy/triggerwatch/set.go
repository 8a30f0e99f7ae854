package triggerwatch

import (
	"context"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Set holds one shared watch per trigger kind. A watch starts when the
// first policy acquires its kind and stops when the last one releases it,
// so that no watch outlives the policies that need it.
type Set struct {
	dynamic  dynamic.Interface
	onChange func(policies []string, namespace, name string)
	// onCount is told how many kinds are watched, each time that changes.
	onCount func(watches int)

	mu      sync.Mutex
	watches map[schema.GroupVersionResource]*triggerWatch
}

type triggerWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	stopped  chan struct{}
	policies map[string]bool
}

// New returns an empty set. onChange is called for each change of an object
// of a watched kind, with the policies using that kind; onCount with the
// number of kinds watched, each time it changes.
func New(d dynamic.Interface, onChange func(policies []string, namespace, name string), onCount func(watches int)) *Set {
	return &Set{dynamic: d, onChange: onChange, onCount: onCount, watches: map[schema.GroupVersionResource]*triggerWatch{}}
}

// Acquire records that policy uses gvr, starting the kind's watch when it
// is the first, and returns the kind's informer.
func (s *Set) Acquire(gvr schema.GroupVersionResource, policy string) cache.SharedIndexInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watches[gvr]
	if w == nil {
		w = &triggerWatch{policies: map[string]bool{}, stopped: make(chan struct{})}
		w.informer = dynamicinformer.NewFilteredDynamicInformer(s.dynamic, gvr, "", 0, cache.Indexers{}, nil).Informer()
		notify := func(obj any) {
			k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			ns, name, err := cache.SplitMetaNamespaceKey(k)
			if err != nil {
				return
			}
			s.onChange(s.policiesOf(gvr), ns, name)
		}
		_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
		})
		var ctx context.Context
		ctx, w.cancel = context.WithCancel(context.Background())
		go func() {
			defer close(w.stopped)
			w.informer.RunWithContext(ctx)
		}()
		s.watches[gvr] = w
		s.onCount(len(s.watches))
	}
	w.policies[policy] = true
	return w.informer
}

// Release records that policy no longer uses gvr; the last release stops
// the watch.
func (s *Set) Release(gvr schema.GroupVersionResource, policy string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watches[gvr]
	if w == nil {
		return
	}
	delete(w.policies, policy)
	if len(w.policies) == 0 {
		w.cancel()
		delete(s.watches, gvr)
		s.onCount(len(s.watches))
	}
}

// policiesOf are the policies using gvr now.
func (s *Set) policiesOf(gvr schema.GroupVersionResource) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watches[gvr]
	if w == nil {
		return nil
	}
	out := make([]string, 0, len(w.policies))
	for p := range w.policies {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// StopAll stops every watch and waits until they have stopped.
func (s *Set) StopAll() {
	s.mu.Lock()
	var stopped []chan struct{}
	for gvr, w := range s.watches {
		w.cancel()
		stopped = append(stopped, w.stopped)
		delete(s.watches, gvr)
	}
	s.onCount(0)
	s.mu.Unlock()
	for _, ch := range stopped {
		<-ch
	}
}
