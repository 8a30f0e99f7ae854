package planeserve

import (
	"context"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// Cleaner removes the data of a plane whose owner is deleted: every key
// under the plane's prefix, in one etcd request, as soon as the owner is
// being deleted (its finalizer holds it meanwhile, so the quota its plane's
// objects held is released before it goes), and at start for owners deleted
// while the server was down. It is the API server dropping storage it owns,
// not a write of API objects: docs/control-planes.md says why.
type Cleaner struct {
	Registry *Registry
	Etcd     *clientv3.Client
	// Prefix is the API server's etcd prefix (--etcd-prefix).
	Prefix string
}

// Start removes what is left of deleted owners' planes and watches for
// owners being deleted (a server Component; needs the registry started).
func (c *Cleaner) Start(ctx context.Context) {
	handler := toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { c.ownerChanged(ctx, obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			c.remove(ctx, obj, true)
		},
	}
	_, _ = c.Registry.projects.AddEventHandler(handler)
	_, _ = c.Registry.orgs.AddEventHandler(handler)
	go func() {
		if !toolscache.WaitForCacheSync(ctx.Done(), c.Registry.projects.HasSynced, c.Registry.orgs.HasSynced) {
			return
		}
		c.sweep(ctx)
	}()
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
	if err := c.removePlane(ctx, p); err != nil {
		klog.FromContext(ctx).Error(err, "Removing the data of a deleted control plane; retried at the next start or change", "plane", p.String())
		return
	}
	if gone {
		c.Registry.forget(p)
	}
}

func (c *Cleaner) removePlane(ctx context.Context, p planes.Plane) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := c.Etcd.Delete(ctx, strings.TrimSuffix(c.Prefix, "/")+p.KeyPrefix()+"/", clientv3.WithPrefix())
	if err == nil && res.Deleted > 0 {
		klog.FromContext(ctx).V(1).Info("Removed a deleted owner's control plane data", "plane", p.String(), "keys", res.Deleted)
	}
	return err
}

// sweep removes the planes, stored under their owner's UID, of owners that
// no longer exist or are being deleted.
func (c *Cleaner) sweep(ctx context.Context) {
	live := map[string]bool{}
	for _, inf := range []toolscache.SharedIndexInformer{c.Registry.projects, c.Registry.orgs} {
		for _, obj := range inf.GetStore().List() {
			if o := obj.(client.Object); o.GetDeletionTimestamp() == nil {
				live[string(o.GetUID())] = true
			}
		}
	}
	for _, kind := range []planes.Kind{planes.Projects, planes.Organizations} {
		root := strings.TrimSuffix(c.Prefix, "/") + planes.KeyRoot + string(kind) + "/"
		key := root
		for {
			res, err := c.Etcd.Get(ctx, key, clientv3.WithRange(clientv3.GetPrefixRangeEnd(root)), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
			if err != nil {
				klog.FromContext(ctx).Error(err, "Listing control plane data at start")
				return
			}
			if len(res.Kvs) == 0 {
				break
			}
			uid, _, _ := strings.Cut(strings.TrimPrefix(string(res.Kvs[0].Key), root), "/")
			if !live[uid] {
				if err := c.removePlane(ctx, planes.Plane{Kind: kind, UID: types.UID(uid)}); err != nil {
					klog.FromContext(ctx).Error(err, "Removing a deleted owner's control plane data at start")
					return
				}
			}
			// The next plane: the first key after this UID's prefix.
			key = clientv3.GetPrefixRangeEnd(root + uid + "/")
		}
	}
}
