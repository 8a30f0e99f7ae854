package grantpolicy

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/leader"
)

// LeaseName is the Lease, in the system namespace, on which replicas elect
// the one that runs the grant engine.
const LeaseName = "quotaplane-grant-policies"

// Options configure the grant engine.
type Options struct {
	// SystemNamespace holds the Lease, and the grants of a cluster-scoped
	// trigger whose template names no namespace.
	SystemNamespace string
	// Identity names this replica in the Lease; defaults to host_pid_random.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers reconcile in parallel.
	Workers int
	// KindRetry is the longest wait before a policy whose trigger kind is
	// not served is tried again.
	KindRetry time.Duration
	// Metrics, when set, shows the policies of the term this replica leads
	// on /metrics (the engine's exporter).
	Metrics *observe.Exporter
}

// DefaultOptions are the production defaults; Identity is the caller's.
func DefaultOptions() Options {
	return Options{SystemNamespace: "quotaplane-system", LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Workers: 8, KindRetry: 5 * time.Second}
}

func (o *Options) complete() error {
	d := DefaultOptions()
	if o.SystemNamespace == "" {
		o.SystemNamespace = d.SystemNamespace
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = d.LeaseDuration, d.RenewDeadline, d.RetryPeriod
	}
	if o.Workers <= 0 {
		o.Workers = d.Workers
	}
	if o.KindRetry <= 0 {
		o.KindRetry = d.KindRetry
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%s_%d_%s", host, os.Getpid(), rand.String(6))
	}
	return nil
}

// Start returns a server component that campaigns in the background and
// runs the grant engine while this replica leads. It returns at once.
func Start(opts Options) func(ctx context.Context, cfg *rest.Config) error {
	return func(ctx context.Context, cfg *rest.Config) error {
		r, err := New(cfg, opts)
		if err != nil {
			return err
		}
		go r.Run(ctx)
		return nil
	}
}

// Runner campaigns for the Lease and runs the grant engine while leading.
type Runner struct {
	opts     Options
	cfg      *rest.Config
	kube     kubernetes.Interface
	election leader.Election
}

// New checks the options and creates the clients; it does not contact the
// server.
func New(cfg *rest.Config, opts Options) (*Runner, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	cfg = rest.AddUserAgent(cfg, "quotaplane-grant-policies")
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the grant engine's client: %w", err)
	}
	e := leader.Election{Namespace: opts.SystemNamespace, Lease: LeaseName, Identity: opts.Identity,
		LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("configuring the grant engine's leader election: %w", err)
	}
	registerMetrics()
	return &Runner{opts: opts, cfg: cfg, kube: kube, election: e}, nil
}

// Run campaigns until ctx is done. Each won term runs the engine until the
// Lease is lost; its watches and workers have stopped before this replica
// campaigns again.
func (r *Runner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("grantpolicy").
		WithValues("lease", klog.KRef(r.opts.SystemNamespace, LeaseName), "identity", r.opts.Identity)
	leader.Campaign(klog.NewContext(ctx, logger), r.kube, r.election, "grant engine's controllers", func(ctx context.Context) error {
		leading.Set(1)
		defer leading.Set(0)
		c, err := newController(r.cfg, r.opts)
		if err != nil {
			return err
		}
		return c.run(ctx)
	})
}
