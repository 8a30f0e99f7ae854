package grantpolicy

import (
	"context"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// triggerSet holds one shared watch per trigger kind. A watch starts when
// the first policy acquires its kind and stops when the last one releases
// it, so that no watch outlives the policies that need it.
type triggerSet struct {
	dynamic  dynamic.Interface
	onChange func(policies []string, namespace, name string)

	mu      sync.Mutex
	watches map[schema.GroupVersionResource]*triggerWatch
}

type triggerWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	stopped  chan struct{}
	policies map[string]bool
}

func newTriggerSet(d dynamic.Interface, onChange func([]string, string, string)) *triggerSet {
	return &triggerSet{dynamic: d, onChange: onChange, watches: map[schema.GroupVersionResource]*triggerWatch{}}
}

// acquire records that policy uses gvr, starting the kind's watch when it
// is the first, and returns the kind's informer.
func (s *triggerSet) acquire(gvr schema.GroupVersionResource, policy string) cache.SharedIndexInformer {
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
		triggerWatches.Set(float64(len(s.watches)))
	}
	w.policies[policy] = true
	return w.informer
}

// release records that policy no longer uses gvr; the last release stops
// the watch.
func (s *triggerSet) release(gvr schema.GroupVersionResource, policy string) {
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
		triggerWatches.Set(float64(len(s.watches)))
	}
}

// policiesOf are the policies using gvr now.
func (s *triggerSet) policiesOf(gvr schema.GroupVersionResource) []string {
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

// stopAll stops every watch and waits until they have stopped.
func (s *triggerSet) stopAll() {
	s.mu.Lock()
	var stopped []chan struct{}
	for gvr, w := range s.watches {
		w.cancel()
		stopped = append(stopped, w.stopped)
		delete(s.watches, gvr)
	}
	triggerWatches.Set(0)
	s.mu.Unlock()
	for _, ch := range stopped {
		<-ch
	}
}
