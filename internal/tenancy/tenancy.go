package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/leader"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// LeaseName is the Lease, in Options.Namespace, on which replicas elect the
// one that runs the tenancy controllers.
const LeaseName = "quotaplane-tenancy"

// Options configure the tenancy controllers.
type Options struct {
	// Namespace holds the Lease; it is created when missing.
	Namespace string
	// Identity names this replica in the Lease.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election as
	// client-go's leaderelection does.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// scheme holds the kinds the tenancy controllers read and write.
var scheme = runtime.NewScheme()

func init() {
	utilruntimeMust(clientgoscheme.AddToScheme(scheme))
	utilruntimeMust(rmv1alpha1.AddToScheme(scheme))
	utilruntimeMust(quotav1alpha1.AddToScheme(scheme))
}

func utilruntimeMust(err error) {
	if err != nil {
		panic(err)
	}
}

const (
	// workers is how many keys each controller reconciles at once.
	workers = 8
	// cacheSyncTimeout bounds how long a term waits for its informers'
	// first lists; a term whose caches do not sync gives the Lease up.
	cacheSyncTimeout = 2 * time.Minute
)

// setLoggerOnce gives controller-runtime's global logger (used by its
// client for the API server's warnings) klog, once per process.
var setLogger = sync.OnceFunc(func() { ctrllog.SetLogger(klog.NewKlogr()) })

// Start returns a server component that campaigns for the Lease in the
// background and runs the controllers while this replica holds it. It returns
// at once.
func Start(opts Options) func(ctx context.Context, cfg *rest.Config) error {
	return func(ctx context.Context, cfg *rest.Config) error {
		if opts.Namespace == "" || opts.Identity == "" {
			return errors.New("the tenancy controllers' leader election needs a namespace and an identity")
		}
		cfg = rest.CopyConfig(cfg)
		// An organization costs about six writes (finalizer, namespace,
		// three RBAC objects, status): a burst of a thousand should not
		// queue behind the client's own rate limit.
		cfg.QPS, cfg.Burst = 1000, 2000
		// The loopback configuration asks for protobuf, which the tenancy
		// kinds (CRDs) do not speak.
		cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		setLogger()
		cfg = rest.AddUserAgent(cfg, "quotaplane-tenancy")
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating the tenancy controllers' client: %w", err)
		}
		cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("creating the tenancy controllers' client: %w", err)
		}
		e := leader.Election{Namespace: opts.Namespace, Lease: LeaseName, Identity: opts.Identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("configuring the tenancy controllers' leader election: %w", err)
		}
		logger := klog.FromContext(ctx).WithName("tenancy").
			WithValues("lease", klog.KRef(opts.Namespace, LeaseName), "identity", opts.Identity)
		go leader.Campaign(klog.NewContext(ctx, logger), kube, e, "organization and project controllers", func(ctx context.Context) error {
			return newTerm(kube, cl).run(ctx)
		})
		return nil
	}
}

// term is one term of leadership: the informers, the queues and the
// reconcilers, all made when it begins and stopped when it ends.
type term struct {
	informers    *informerSet
	orgQueue     reconcile.Queue[string]
	projectQueue reconcile.Queue[string]
	orgs         *organizationReconciler
	projects     *projectReconciler
}

func newTerm(kube kubernetes.Interface, cl client.WithWatch) *term {
	inf := newInformers(kube, cl)
	return &term{
		informers:    inf,
		orgQueue:     newQueue(),
		projectQueue: newQueue(),
		orgs:         &organizationReconciler{cache: inf.stores(), live: cl, client: cl, charged: chargedTo(cl, "Organization")},
		projects:     &projectReconciler{cache: inf.stores(), client: cl, charged: chargedTo(cl, "Project")},
	}
}

// newQueue is a controller's queue: retries back off exponentially from
// 5 ms to 1000 s, and all retries together are held to 10 per second (burst
// 100).
func newQueue() reconcile.Queue[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
}

// run starts the informers, waits until every handler has seen their first
// lists, then reconciles until ctx ends; it returns once the queues are shut
// down and every goroutine it started has returned.
func (t *term) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		t.orgQueue.ShutDown()
		t.projectQueue.ShutDown()
		wg.Wait()
		t.informers.wait()
	}()
	synced, err := t.informers.addHandlers(t.orgQueue, t.projectQueue)
	if err != nil {
		return err
	}
	t.informers.start(ctx)
	syncCtx, stop := context.WithTimeout(ctx, cacheSyncTimeout)
	ok := toolscache.WaitForCacheSync(syncCtx.Done(), synced...)
	stop()
	if !ok {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the tenancy controllers' caches did not sync within %s", cacheSyncTimeout)
	}
	orgCtx := klog.NewContext(ctx, logger.WithValues("controller", "organization"))
	projectCtx := klog.NewContext(ctx, logger.WithValues("controller", "project"))
	for range workers {
		wg.Go(func() { reconcile.RunRequeue(orgCtx, t.orgQueue, "organization", t.orgs.reconcile) })
		wg.Go(func() { reconcile.RunRequeue(projectCtx, t.projectQueue, "project", t.projects.reconcile) })
	}
	logger.V(2).Info("Tenancy controllers started", "workers", workers)
	<-ctx.Done()
	return nil
}
