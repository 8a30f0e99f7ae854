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
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// ObjectWatch ties claims made at admission to their objects when the
// garbage collector cannot: a claim in another namespace than its object
// (Kubernetes treats a cross-namespace ownerReference as absent), or a claim
// whose ownerReference was removed (its object deleted with
// --cascade=orphan). It watches the metadata of those objects' kinds and
// deletes such a claim once its object is gone, so that its quota is
// released exactly when the object stops existing. An ownerReference whose
// version is no longer served is no valid owner either.
type ObjectWatch struct {
	// Stored reads a claim from the cache by namespace/name.
	Stored   func(key string) (*quotav1alpha1.ResourceClaim, bool, error)
	metadata metadata.Interface
	client   client.Client
	served   *kinds.Resolver

	mu sync.Mutex
	// informers watch object metadata, one per resource (and control
	// plane) with tracked claims, at the version served.
	informers map[watchKey]watched
	// Planes reach objects stored in control planes (nil: none are).
	Planes *planes.Clients
	// crdWatch: CustomResourceDefinitions are watched.
	crdWatch bool
	// tracked are the claims that name an object, by the object's UID.
	tracked map[string]map[string]struct{}
	// inPlane are the plane of each tracked claim of a plane's object, and
	// perPlane how many tracked claims each plane has: a plane's watches
	// stop with its last claim (a removed plane's would relist forever).
	inPlane  map[string]string
	perPlane map[string]int
	// Queue holds claim keys to check against their objects.
	Queue reconcile.Queue[string]
}

// planeRecheck is how soon a claim whose plane is not served is looked at
// again.
const planeRecheck = 30 * time.Second

// watchKey is a resource in a control plane ("" the root).
type watchKey struct {
	plane string
	gr    schema.GroupResource
}

// watched is a metadata watch of one resource at one version.
type watched struct {
	version  string
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
}

// NewObjectWatch watches objects through md, at the versions r serves, and
// deletes claims through c; stored reads the claim cache.
func NewObjectWatch(md metadata.Interface, c client.Client, r *kinds.Resolver, stored func(string) (*quotav1alpha1.ResourceClaim, bool, error)) *ObjectWatch {
	return &ObjectWatch{
		Stored:    stored,
		metadata:  md,
		client:    c,
		served:    r,
		informers: map[watchKey]watched{},
		tracked:   map[string]map[string]struct{}{},
		inPlane:   map[string]string{},
		perPlane:  map[string]int{},
		Queue:     reconcile.NewQueue[string](100*time.Millisecond, 10*time.Second),
	}
}

// ownedByObject reports whether a claim carries an ownerReference to its
// object that the garbage collector honours: the object is cluster scoped or
// in the claim's namespace, and the reference's version is served (the
// collector cannot map one that is not, and would hold the claim forever).
func ownedByObject(c *quotav1alpha1.ResourceClaim, objectUID string, served schema.GroupVersionResource) bool {
	ref := c.Spec.ResourceRef
	for _, o := range c.OwnerReferences {
		if string(o.UID) == objectUID {
			gv, err := schema.ParseGroupVersion(o.APIVersion)
			return err == nil && gv.Version == served.Version && (ref == nil || ref.Namespace == "" || ref.Namespace == c.Namespace)
		}
	}
	return false
}

// Observe tracks a claim that names its object. Reconcile then finds out
// whether the garbage collector ties it to the object; if not, this watch
// does.
func (w *ObjectWatch) Observe(ctx context.Context, c *quotav1alpha1.ResourceClaim) {
	uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	_, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	if uid == "" || !ok || c.Spec.ResourceRef == nil || c.Labels[members.Label] != "" {
		// A member cluster's objects are watched by its webhook.
		return
	}
	k := formats.Key(c.Namespace, c.Name)
	w.mu.Lock()
	if w.tracked[uid] == nil {
		w.tracked[uid] = map[string]struct{}{}
	}
	w.tracked[uid][k] = struct{}{}
	if p := c.Annotations[planes.Annotation]; p != "" {
		if _, ok := w.inPlane[k]; !ok {
			w.perPlane[p]++
		}
		w.inPlane[k] = p
	}
	w.startCRDWatchLocked(ctx)
	w.mu.Unlock()
	w.Queue.Add(k)
}

// Forget stops tracking a deleted claim.
func (w *ObjectWatch) Forget(c *quotav1alpha1.ResourceClaim) {
	uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	k := formats.Key(c.Namespace, c.Name)
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.inPlane[k]; ok {
		delete(w.inPlane, k)
		if w.perPlane[p]--; w.perPlane[p] <= 0 {
			delete(w.perPlane, p)
			w.forgetPlaneLocked(p)
		}
	}
	if set := w.tracked[uid]; set != nil {
		delete(set, formats.Key(c.Namespace, c.Name))
		if len(set) == 0 {
			delete(w.tracked, uid)
		}
	}
}

// informerFor is the metadata watch of gvr's resource at gvr's version,
// started when first needed; once its first list is in, every tracked claim
// is checked (an object deleted while nobody watched is found then). A watch
// at another version of the resource (one no longer served) is replaced.
func (w *ObjectWatch) informerFor(ctx context.Context, plane string, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	md, err := w.metadataOf(plane)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := watchKey{plane: plane, gr: gvr.GroupResource()}
	if cur, ok := w.informers[key]; ok {
		if cur.version == gvr.Version {
			return cur.informer, nil
		}
		cur.stop()
	}
	wctx, stop := context.WithCancel(ctx)
	inf := reconcile.LeanInformer(metadatainformer.NewFilteredMetadataInformer(md, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer())
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
	if plane != "" {
		// A plane's watch ends when the plane stops being served (its
		// owner being deleted) and may fail to resume for a while: its
		// claims are then looked at with live reads, so that no delete
		// waits for the watch to come back.
		_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			w.checkPlane(plane)
		})
	}
	w.informers[key] = watched{version: gvr.Version, informer: inf, stop: stop}
	go inf.RunWithContext(wctx)
	go func() {
		if cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
			w.checkAll()
		}
	}()
	return inf, nil
}

// metadataOf is the metadata client of a control plane ("" the root).
func (w *ObjectWatch) metadataOf(plane string) (metadata.Interface, error) {
	if plane == "" || w.Planes == nil {
		return w.metadata, nil
	}
	p, err := planes.Parse(plane)
	if err != nil {
		return nil, err
	}
	return w.Planes.Metadata(p)
}

// forgetPlaneLocked stops the watches of a control plane none of whose
// objects has a tracked claim any more (a removed plane's, among them).
func (w *ObjectWatch) forgetPlaneLocked(plane string) {
	for k, cur := range w.informers {
		if k.plane == plane {
			cur.stop()
			delete(w.informers, k)
		}
	}
}

// startCRDWatchLocked checks every tracked claim again whenever a
// CustomResourceDefinition changes: a version may have stopped being served,
// so that an ownerReference the collector honoured no longer maps.
func (w *ObjectWatch) startCRDWatchLocked(ctx context.Context) {
	if w.crdWatch {
		return
	}
	w.crdWatch = true
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	inf := reconcile.LeanInformer(metadatainformer.NewFilteredMetadataInformer(w.metadata, crds, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer())
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(metav1.Object)
			n, ok2 := obj.(metav1.Object)
			if ok1 && ok2 && o.GetGeneration() != n.GetGeneration() {
				w.checkAll()
			}
		},
	})
	go inf.RunWithContext(ctx)
}

// checkPlane queues the tracked claims of a plane's objects.
func (w *ObjectWatch) checkPlane(plane string) {
	w.mu.Lock()
	var keys []string
	for k, p := range w.inPlane {
		if p == plane {
			keys = append(keys, k)
		}
	}
	w.mu.Unlock()
	for _, k := range keys {
		w.Queue.Add(k)
	}
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

// Reconcile deletes a tracked claim whose object is gone, unless the garbage
// collector ties it to its object. The object is read at the version served
// now, whatever the claim recorded: an unserved version is never taken for a
// deleted object. The cache may lag the claim (its object was stored just
// before it): a claim is deleted only after a live read confirms its object
// does not exist (or is another object of the same name), and only the claim
// of that UID.
func (w *ObjectWatch) Reconcile(ctx context.Context, k string) error {
	c, exists, err := w.Stored(k)
	if err != nil || !exists {
		return err
	}
	uid := c.Annotations[quotav1alpha1.AnnotationResourceUID]
	recorded, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	ref := c.Spec.ResourceRef
	if !ok || ref == nil || uid == "" || c.DeletionTimestamp != nil {
		return nil
	}
	gvr, err := w.served.Resolve(ctx, recorded)
	if err != nil {
		return err // not served at all: kept, looked at again later
	}
	plane := c.Annotations[planes.Annotation]
	if plane == "" && ownedByObject(c, uid, gvr) {
		return nil // the garbage collector deletes it with its object
	}
	inf, err := w.informerFor(ctx, plane, gvr)
	if err != nil {
		return err
	}
	if inf.HasSynced() {
		if o, found, _ := inf.GetStore().GetByKey(formats.Key(ref.Namespace, ref.Name)); found {
			if m, ok := o.(metav1.Object); ok && string(m.GetUID()) == uid {
				return nil
			}
		}
	}
	var live *metav1.PartialObjectMetadata
	err = w.served.Read(ctx, recorded, func(at schema.GroupVersionResource) error {
		var err error
		md, err := w.metadataOf(plane)
		if err != nil {
			return err
		}
		live, err = md.Resource(at).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		return err
	})
	switch {
	case err == nil && string(live.UID) == uid:
		return nil
	case plane != "" && apierrors.IsNotFound(err) && !planes.ObjectNotFound(err, ref.Name):
		// The plane is not served (its owner is being deleted, or not
		// Ready): whether the object is stored is unknown. A removed
		// plane's claims are released by its removal (cleanup.Cleaner),
		// once its storage is gone.
		klog.FromContext(ctx).V(2).Info("The control plane of a claim's object is not served; looking again later", "claim", k, "plane", plane, "answer", err.Error())
		w.Queue.AddAfter(k, planeRecheck)
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
