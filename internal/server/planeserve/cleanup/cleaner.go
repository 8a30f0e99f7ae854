package cleanup

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/server/planeserve"
)

// Cleaner removes the data of a plane whose owner is deleted: every key
// under the plane's prefix, in one etcd request, as soon as the owner is
// being deleted (its finalizer holds it meanwhile), and at start for owners
// deleted while the server was down. It is the API server dropping storage
// it owns, not a write of API objects: docs/control-planes.md says why.
// Once the plane's storage holds no key, it releases the claims of the
// plane's objects (deletes them, by UID): their objects are gone, and the
// engine, which reads objects through the plane, cannot tell that from a
// plane no longer served. The owner's finalizer, waiting until nothing is
// charged to it, then lets it go (docs/exactly-once.md).
type Cleaner struct {
	Registry *planeserve.Registry
	Etcd     *clientv3.Client
	// Prefix is the API server's etcd prefix (--etcd-prefix).
	Prefix string

	claims metadata.Interface
}

// cleanRetry is how soon a removal that failed is tried again.
const cleanRetry = 5 * time.Second

// claimsResource is the resource of the engine's claims, kept at the root.
var claimsResource = schema.GroupVersionResource{Group: planes.QuotaGroup, Version: "v1alpha1", Resource: "resourceclaims"}

// Start removes what is left of deleted owners' planes and watches for
// owners being deleted (a server Component; needs the registry started).
func (c *Cleaner) Start(ctx context.Context) error {
	md, err := metadata.NewForConfig(c.Registry.Loopback())
	if err != nil {
		return err
	}
	c.claims = md
	handler := toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { c.ownerChanged(ctx, obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			c.remove(ctx, obj, true)
		},
	}
	owners := c.Registry.Owners()
	synced := make([]toolscache.InformerSynced, 0, len(owners))
	for _, inf := range owners {
		_, _ = inf.AddEventHandler(handler)
		synced = append(synced, inf.HasSynced)
	}
	go func() {
		if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		c.sweep(ctx)
	}()
	return nil
}

func (c *Cleaner) ownerChanged(ctx context.Context, obj interface{}) {
	if o, ok := obj.(client.Object); ok && o.GetDeletionTimestamp() != nil {
		c.remove(ctx, obj, false)
	}
}

func (c *Cleaner) remove(ctx context.Context, obj interface{}, gone bool) {
	o, ok := obj.(client.Object)
	if !ok || o.GetUID() == "" {
		return
	}
	kind := planes.Projects
	if _, isOrg := obj.(*rmv1alpha1.Organization); isOrg {
		kind = planes.Organizations
	}
	p := planes.Plane{Kind: kind, Name: o.GetName(), UID: o.GetUID()}
	err := c.removePlane(ctx, p)
	if err == nil {
		err = c.release(ctx, p)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Removing the data of a deleted control plane; retrying", "plane", p.String(), "after", cleanRetry)
		time.AfterFunc(cleanRetry, func() {
			if ctx.Err() == nil {
				c.remove(ctx, obj, gone)
			}
		})
		return
	}
	if gone {
		c.Registry.Forget(p)
	}
}

// release deletes the claims of plane p's objects, kept at the root in its
// quota namespace and marked with the plane, once the plane's storage is
// confirmed empty. Each is deleted with its UID as precondition: a claim
// written again meanwhile is another decision, looked at by the next pass.
func (c *Cleaner) release(ctx context.Context, p planes.Plane) error {
	if c.claims == nil {
		return nil
	}
	list, err := c.claims.Resource(claimsResource).Namespace(p.QuotaNamespace()).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil // the quota kinds are not served: nothing is claimed
	case err != nil:
		return fmt.Errorf("listing the claims of control plane %s: %w", p, err)
	}
	released := 0
	for i := range list.Items {
		cl := &list.Items[i]
		if cl.Annotations[planes.Annotation] != p.String() || cl.DeletionTimestamp != nil {
			continue
		}
		uid := cl.UID
		err := c.claims.Resource(claimsResource).Namespace(cl.Namespace).Delete(ctx, cl.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("releasing claim %s/%s of control plane %s, whose objects were removed: %w", cl.Namespace, cl.Name, p, err)
		}
		released++
	}
	if released > 0 {
		klog.FromContext(ctx).V(1).Info("Released the claims of a removed control plane's objects", "plane", p.String(), "claims", released)
	}
	return nil
}

// removePlane deletes every key under plane p's prefix, and returns once
// none is left (a write that passed the plane's resolution just before its
// owner was marked deleted may land after the first delete).
func (c *Cleaner) removePlane(ctx context.Context, p planes.Plane) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key := strings.TrimSuffix(c.Prefix, "/") + p.KeyPrefix() + "/"
	for {
		res, err := c.Etcd.Delete(ctx, key, clientv3.WithPrefix())
		if err != nil {
			return err
		}
		if res.Deleted > 0 {
			klog.FromContext(ctx).V(1).Info("Removed a deleted owner's control plane data", "plane", p.String(), "keys", res.Deleted)
		}
		left, err := c.Etcd.Get(ctx, key, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if left.Count == 0 {
			return nil
		}
	}
}

// sweep removes the planes, stored under their owner's UID, of owners that
// no longer exist or are being deleted.
func (c *Cleaner) sweep(ctx context.Context) {
	live := map[string]bool{}
	for _, inf := range c.Registry.Owners() {
		for _, obj := range inf.GetStore().List() {
			if o := obj.(client.Object); o.GetDeletionTimestamp() == nil {
				live[string(o.GetUID())] = true
			} else {
				// Being deleted when the server stopped: its data may be
				// removed already, its claims not yet released.
				c.remove(ctx, obj, false)
			}
		}
	}
	var failed error
	err := planeserve.PlanesWithData(ctx, c.Etcd, c.Prefix, func(kind planes.Kind, uid types.UID) bool {
		if live[string(uid)] {
			return true
		}
		failed = c.removePlane(ctx, planes.Plane{Kind: kind, UID: uid})
		return failed == nil
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Removing deleted owners' control plane data at start")
	}
}
