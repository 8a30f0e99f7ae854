package settle

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/record"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// ObjectWatch ties claims made at admission to their objects when the
// garbage collector cannot: a claim in another namespace than its object
// (Kubernetes treats a cross-namespace ownerReference as absent), or a claim
// whose ownerReference was removed (its object deleted with
// --cascade=orphan). It watches the metadata of those objects' kinds and
// deletes such a claim once its object is gone, so that its quota is
// released exactly when the object stops existing.
type ObjectWatch struct {
	// Stored reads a claim from the cache by namespace/name.
	Stored   func(key string) (*quotav1alpha1.ResourceClaim, bool, error)
	metadata metadata.Interface
	client   client.Client

	mu sync.Mutex
	// informers watch object metadata, one per resource with tracked claims.
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
	// tracked are claims without a valid owner, by their object's UID.
	tracked map[string]map[string]struct{}
	// Queue holds claim keys to check against their objects.
	Queue reconcile.Queue[string]
}

// NewObjectWatch watches objects through md and deletes claims through c;
// stored reads the claim cache.
func NewObjectWatch(md metadata.Interface, c client.Client, stored func(string) (*quotav1alpha1.ResourceClaim, bool, error)) *ObjectWatch {
	return &ObjectWatch{
		Stored:    stored,
		metadata:  md,
		client:    c,
		informers: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		tracked:   map[string]map[string]struct{}{},
		Queue:     reconcile.NewQueue[string](100*time.Millisecond, 10*time.Second),
	}
}

// ownedByObject reports whether a claim carries an ownerReference to its
// object that the garbage collector honours.
func ownedByObject(c *quotav1alpha1.ResourceClaim, objectUID string) bool {
	ref := c.Spec.ResourceRef
	for _, o := range c.OwnerReferences {
		if string(o.UID) == objectUID {
			return ref == nil || ref.Namespace == "" || ref.Namespace == c.Namespace
		}
	}
	return false
}

// Observe tracks a claim that names its object and has no valid owner.
func (w *ObjectWatch) Observe(ctx context.Context, c *quotav1alpha1.ResourceClaim) {
	uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	gvr, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	if uid == "" || !ok || c.Spec.ResourceRef == nil || ownedByObject(c, uid) {
		return
	}
	k := record.Key(c.Namespace, c.Name)
	w.mu.Lock()
	if w.tracked[uid] == nil {
		w.tracked[uid] = map[string]struct{}{}
	}
	w.tracked[uid][k] = struct{}{}
	_, watching := w.informers[gvr]
	if !watching {
		w.startLocked(ctx, gvr)
	}
	w.mu.Unlock()
	w.Queue.Add(k)
}

// Forget stops tracking a deleted claim.
func (w *ObjectWatch) Forget(c *quotav1alpha1.ResourceClaim) {
	uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	w.mu.Lock()
	defer w.mu.Unlock()
	if set := w.tracked[uid]; set != nil {
		delete(set, record.Key(c.Namespace, c.Name))
		if len(set) == 0 {
			delete(w.tracked, uid)
		}
	}
}

// startLocked watches the metadata of one resource; once its first list is
// in, every tracked claim is checked (an object deleted while nobody watched
// is found then). w.mu must be held.
func (w *ObjectWatch) startLocked(ctx context.Context, gvr schema.GroupVersionResource) {
	inf := metadatainformer.NewFilteredMetadataInformer(w.metadata, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			o, ok := reconcile.Unwrap(obj).(metav1.Object)
			if !ok {
				return
			}
			w.mu.Lock()
			var keys []string
			for k := range w.tracked[string(o.GetUID())] {
				keys = append(keys, k)
			}
			w.mu.Unlock()
			for _, k := range keys {
				w.Queue.Add(k)
			}
		},
	})
	w.informers[gvr] = inf
	go inf.RunWithContext(ctx)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			w.checkAll()
		}
	}()
}

func (w *ObjectWatch) checkAll() {
	w.mu.Lock()
	var keys []string
	for _, set := range w.tracked {
		for k := range set {
			keys = append(keys, k)
		}
	}
	w.mu.Unlock()
	for _, k := range keys {
		w.Queue.Add(k)
	}
}

// Reconcile deletes a tracked claim whose object is gone. The cache may lag the
// claim (its object was stored just before it): a claim is deleted only
// after a live read confirms its object does not exist (or is another
// object of the same name), and only the claim of that UID.
func (w *ObjectWatch) Reconcile(ctx context.Context, k string) error {
	c, exists, err := w.Stored(k)
	if err != nil || !exists {
		return err
	}
	uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	gvr, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	ref := c.Spec.ResourceRef
	if !ok || ref == nil || uid == "" || ownedByObject(c, uid) || c.DeletionTimestamp != nil {
		return nil
	}
	w.mu.Lock()
	inf := w.informers[gvr]
	w.mu.Unlock()
	if inf != nil && inf.HasSynced() {
		if o, found, _ := inf.GetStore().GetByKey(record.Key(ref.Namespace, ref.Name)); found {
			if m, ok := o.(metav1.Object); ok && string(m.GetUID()) == uid {
				return nil
			}
		}
	}
	live, err := w.metadata.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case err == nil && string(live.UID) == uid:
		return nil
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	klog.FromContext(ctx).V(2).Info("Deleting a claim whose object is gone", "claim", k, "object", fmt.Sprintf("%s %s/%s", ref.Kind, ref.Namespace, ref.Name))
	err = w.client.Delete(ctx, c, client.Preconditions{UID: &c.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or another claim of that name now
	}
	return err
}
