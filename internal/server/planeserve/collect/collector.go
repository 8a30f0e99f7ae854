package collect

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/leader"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/server/planeserve"
)

// LeaseName is the Lease on which the replicas elect the one that sweeps
// every plane.
const LeaseName = "quotaplane-plane-collector"

const (
	// coalesce is how long a plane's deletions are gathered into one pass.
	coalesce = 200 * time.Millisecond
	// waitAgain is how soon a pass that waits for something (a namespace's
	// contents to go, blocking dependents) runs again; the deletions it
	// waits for also bring it back sooner.
	waitAgain = 2 * time.Second
	// workers pass over planes at once.
	workers = 2
)

// Collector is the planes' garbage collector and namespace controller.
type Collector struct {
	Registry *planeserve.Registry
	Etcd     *clientv3.Client
	// Prefix is the API server's etcd prefix (--etcd-prefix).
	Prefix string
	// Election chooses the replica that sweeps (Lease is set by Start).
	Election leader.Election
	// SweepEvery is how often the leader sweeps every plane that holds
	// data, besides once at the start of its term.
	SweepEvery time.Duration

	queue workqueue.TypedRateLimitingInterface[job]
	once  sync.Once

	// config reaches the root; a pass reaches a plane with its URL.
	config    *rest.Config
	discovery *discovered
}

// job is a pass over a plane: one namespace of it, or all ("").
type job struct {
	plane     planes.Plane
	namespace string
}

func (c *Collector) init() {
	c.once.Do(func() {
		c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[job](500*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[job]{Name: "plane_collector"})
	})
}

// Collect is told of an object deleted, marked for deletion or created
// with owners in plane p (planeserve.Storage.OnCollect): its namespace is
// passed over soon, the whole plane for a cluster-scoped object.
func (c *Collector) Collect(p planes.Plane, namespace string) {
	c.init()
	c.queue.AddAfter(job{plane: p, namespace: namespace}, coalesce)
}

// Start starts the workers and the campaign for sweeping (a server
// Component; needs the registry started).
func (c *Collector) Start(ctx context.Context, loopback *rest.Config) error {
	c.init()
	cfg := rest.CopyConfig(loopback)
	cfg = rest.AddUserAgent(cfg, "quotaplane-plane-collector")
	c.config = cfg
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the plane collector's client: %w", err)
	}
	c.discovery = newDiscovered(kube.Discovery())
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	e := c.Election
	e.Lease = LeaseName
	if err := e.Validate(); err != nil {
		return fmt.Errorf("configuring the plane collector's leader election: %w", err)
	}
	logger := klog.FromContext(ctx).WithName("plane-collector").
		WithValues("lease", klog.KRef(e.Namespace, e.Lease), "identity", e.Identity)
	ctx = klog.NewContext(ctx, logger)
	for range workers {
		go wait.UntilWithContext(ctx, c.work, time.Second)
	}
	go leader.Campaign(ctx, kube, e, "sweeps of the control planes' garbage", c.sweepWhileLeading)
	return nil
}

func (c *Collector) work(ctx context.Context) {
	for {
		j, shutdown := c.queue.Get()
		if shutdown {
			return
		}
		again, err := c.pass(ctx, j)
		switch {
		case err != nil:
			klog.FromContext(ctx).Error(err, "Collecting in a control plane; retrying", "plane", j.plane.String(), "namespace", j.namespace)
			c.queue.AddRateLimited(j)
		case again:
			c.queue.Forget(j)
			c.queue.AddAfter(j, waitAgain)
		default:
			c.queue.Forget(j)
		}
		c.queue.Done(j)
	}
}

// sweepWhileLeading sweeps at once, then every SweepEvery, until the term
// ends.
func (c *Collector) sweepWhileLeading(ctx context.Context) error {
	every := c.SweepEvery
	if every <= 0 {
		every = 10 * time.Minute
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		st, err := c.Sweep(ctx)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Sweeping the control planes")
			return
		}
		klog.FromContext(ctx).V(2).Info("Swept the control planes", "planes", st.Planes, "took", st.Took)
	}, every)
	return nil
}

// SweepStats say what a sweep did.
type SweepStats struct {
	// Planes passed over: those holding data whose owner exists.
	Planes int
	// Took is the sweep's duration, from the first etcd read to the last
	// pass.
	Took time.Duration
}

// Sweep passes over every plane that holds data and whose owner exists (a
// deleted owner's data is the cleaner's), `workers` at a time, and returns
// once every pass is done; a pass that must run again is queued. A plane
// never used holds no key: it costs one keys-only etcd read.
func (c *Collector) Sweep(ctx context.Context) (SweepStats, error) {
	c.init()
	began := time.Now()
	owners := map[string]planes.Plane{}
	for _, inf := range c.Registry.Owners() {
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return SweepStats{}, ctx.Err()
		}
		for _, obj := range inf.GetStore().List() {
			o := obj.(client.Object)
			kind := planes.Projects
			if _, isOrg := obj.(*rmv1alpha1.Organization); isOrg {
				kind = planes.Organizations
			}
			owners[string(kind)+"/"+string(o.GetUID())] = planes.Plane{Kind: kind, Name: o.GetName(), UID: o.GetUID()}
		}
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				again, err := c.pass(ctx, j)
				switch {
				case err != nil:
					klog.FromContext(ctx).Error(err, "Sweeping a control plane; retrying", "plane", j.plane.String())
					c.queue.AddRateLimited(j)
				case again:
					c.queue.AddAfter(j, waitAgain)
				}
			}
		})
	}
	n := 0
	err := planeserve.PlanesWithData(ctx, c.Etcd, c.Prefix, func(kind planes.Kind, uid types.UID) bool {
		p, ok := owners[string(kind)+"/"+string(uid)]
		if !ok {
			return true
		}
		select {
		case jobs <- job{plane: p}:
			n++
			return true
		case <-ctx.Done():
			return false
		}
	})
	close(jobs)
	wg.Wait()
	return SweepStats{Planes: n, Took: time.Since(began)}, err
}
