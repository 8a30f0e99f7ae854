package engine

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// namespaceWaiter writes a bucket as soon as its namespace appears: the
// engine never creates a bucket namespace (bucketNamespaceReady), so a bucket
// of an organization created a moment later waits for the organization's
// controller. The bucket's own retries with backoff stay as the backstop; the
// watch on namespace metadata starts with the first bucket that waits.
type namespaceWaiter struct {
	t       *term
	mu      sync.Mutex
	started bool
	waiting map[string]map[quota.BucketID]struct{}
}

func newNamespaceWaiter(t *term) *namespaceWaiter {
	return &namespaceWaiter{t: t, waiting: map[string]map[quota.BucketID]struct{}{}}
}

// wait records that bucket id waits for namespace ns.
func (w *namespaceWaiter) wait(ns string, id quota.BucketID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting[ns] == nil {
		w.waiting[ns] = map[quota.BucketID]struct{}{}
	}
	w.waiting[ns][id] = struct{}{}
	if w.started || w.t.ctx == nil {
		return
	}
	w.started = true
	inf := metadatainformer.NewFilteredMetadataInformer(w.t.r.metadata, corev1.SchemeGroupVersion.WithResource("namespaces"),
		metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	appeared := func(obj any) {
		if o, ok := eventObject(obj).(metav1.Object); ok && o.GetDeletionTimestamp() == nil {
			w.release(o.GetName())
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    appeared,
		UpdateFunc: func(_, obj any) { appeared(obj) },
	})
	go inf.RunWithContext(w.t.ctx)
}

// release queues the buckets waiting for namespace ns.
func (w *namespaceWaiter) release(ns string) {
	w.mu.Lock()
	ids := w.waiting[ns]
	delete(w.waiting, ns)
	w.mu.Unlock()
	for id := range ids {
		w.t.buckets.Add(id)
	}
}
