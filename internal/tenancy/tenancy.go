package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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
	"github.com/quotaplane/quotaplane/internal/leader"
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
		e := leader.Election{Namespace: opts.Namespace, Lease: LeaseName, Identity: opts.Identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("configuring the tenancy controllers' leader election: %w", err)
		}
		logger := klog.FromContext(ctx).WithName("tenancy").
			WithValues("lease", klog.KRef(opts.Namespace, LeaseName), "identity", opts.Identity)
		go leader.Campaign(klog.NewContext(ctx, logger), kube, e, "organization and project controllers", func(ctx context.Context) error {
			return lead(ctx, cfg)
		})
		return nil
	}
}

// lead runs a new manager for one term.
func lead(ctx context.Context, cfg *rest.Config) error {
	mgr, err := NewManager(ctx, cfg)
	if err != nil {
		return fmt.Errorf("creating the tenancy manager: %w", err)
	}
	if err := Setup(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// controllerOptions are the options of both controllers.
func controllerOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: 8}
}
