package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
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

// Scheme holds the kinds the tenancy controllers read and write.
var Scheme = runtime.NewScheme()

func init() {
	utilruntimeMust(clientgoscheme.AddToScheme(Scheme))
	utilruntimeMust(rmv1alpha1.AddToScheme(Scheme))
}

func utilruntimeMust(err error) {
	if err != nil {
		panic(err)
	}
}

// Index keys, registered by Setup.
const (
	// projectOwnerIndex indexes Projects by spec.ownerRef.name.
	projectOwnerIndex = "spec.ownerRef.name"
)

// Setup registers both controllers and their index with mgr.
func Setup(ctx context.Context, mgr manager.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &rmv1alpha1.Project{}, projectOwnerIndex, func(o client.Object) []string {
		return []string{o.(*rmv1alpha1.Project).Spec.OwnerRef.Name}
	}); err != nil {
		return fmt.Errorf("indexing projects by organization: %w", err)
	}
	if err := (&OrganizationReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the organization controller: %w", err)
	}
	if err := (&ProjectReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the project controller: %w", err)
	}
	return nil
}

// NewManager returns a manager for one term of leadership: no leader
// election of its own, no metrics or health server, and a cache that holds
// only the namespaces, bindings and roles of organizations.
func NewManager(ctx context.Context, cfg *rest.Config) (manager.Manager, error) {
	owned, err := labels.NewRequirement(rmv1alpha1.OrganizationNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	byOrg := cache.ByObject{Label: labels.NewSelector().Add(*owned)}
	return manager.New(cfg, manager.Options{
		Scheme:                 Scheme,
		Logger:                 klog.FromContext(ctx),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Namespace{}:          byOrg,
			&rbacv1.RoleBinding{}:        byOrg,
			&rbacv1.ClusterRole{}:        byOrg,
			&rbacv1.ClusterRoleBinding{}: byOrg,
		}},
	})
}

// setLoggerOnce gives controller-runtime's global logger (used by its
// informers) klog, once per process.
var setLoggerOnce sync.Once

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
		setLoggerOnce.Do(func() { ctrllog.SetLogger(klog.NewKlogr()) })
		cfg = rest.AddUserAgent(cfg, "quotaplane-tenancy")
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating the tenancy controllers' client: %w", err)
		}
		c := &campaign{opts: opts, kube: kube, cfg: cfg}
		if _, err := leaderelection.NewLeaderElector(c.electionConfig(nil)); err != nil {
			return fmt.Errorf("configuring the tenancy controllers' leader election: %w", err)
		}
		logger := klog.FromContext(ctx).WithName("tenancy").
			WithValues("lease", klog.KRef(opts.Namespace, LeaseName), "identity", opts.Identity)
		go c.run(klog.NewContext(ctx, logger))
		return nil
	}
}

type campaign struct {
	opts Options
	kube kubernetes.Interface
	cfg  *rest.Config
}

// run campaigns until ctx is done; each won term runs a new manager until
// the Lease is lost.
func (c *campaign) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		if err := c.ensureNamespace(ctx); err != nil {
			logger.Error(err, "Cannot create the namespace of the tenancy Lease; retrying")
			sleep(ctx, c.opts.RetryPeriod)
			continue
		}
		c.term(ctx)
		sleep(ctx, c.opts.RetryPeriod)
	}
}

func (c *campaign) term(parent context.Context) {
	logger := klog.FromContext(parent)
	ctx, giveUp := context.WithCancel(parent)
	defer giveUp()
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(c.electionConfig(leading))
	if err != nil { // validated by Start
		logger.Error(err, "Invalid leader election configuration")
		return
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		elector.Run(ctx)
	}()
	select {
	case <-ended:
		return
	case leadCtx := <-leading:
		logger.Info("Leading: running the organization and project controllers")
		if err := c.lead(klog.NewContext(leadCtx, logger)); err != nil && leadCtx.Err() == nil {
			logger.Error(err, "The tenancy controllers could not run; giving the Lease up")
		}
		giveUp()
		<-ended
		if parent.Err() == nil {
			logger.Info("No longer leading; the tenancy controllers have stopped; campaigning again")
		}
	}
}

func (c *campaign) lead(ctx context.Context) error {
	mgr, err := NewManager(ctx, c.cfg)
	if err != nil {
		return fmt.Errorf("creating the tenancy manager: %w", err)
	}
	if err := Setup(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

func (c *campaign) electionConfig(leading chan<- context.Context) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.opts.Namespace, Name: LeaseName},
			Client:     c.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: c.opts.Identity},
		},
		LeaseDuration:   c.opts.LeaseDuration,
		RenewDeadline:   c.opts.RenewDeadline,
		RetryPeriod:     c.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leading <- ctx },
			OnStoppedLeading: func() {},
		},
	}
}

func (c *campaign) ensureNamespace(ctx context.Context) error {
	_, err := c.kube.CoreV1().Namespaces().Get(ctx, c.opts.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.opts.Namespace}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// controllerOptions are the options of both controllers.
func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 8}
}
