package grantpolicy

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
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
	opts Options
	cfg  *rest.Config
	kube kubernetes.Interface
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
	r := &Runner{opts: opts, cfg: cfg, kube: kube}
	if _, err := leaderelection.NewLeaderElector(r.electionConfig(nil)); err != nil {
		return nil, fmt.Errorf("configuring the grant engine's leader election: %w", err)
	}
	registerMetrics()
	return r, nil
}

// Run campaigns until ctx is done. Each won term runs the engine until the
// Lease is lost; its watches and workers have stopped before this replica
// campaigns again.
func (r *Runner) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("grantpolicy").
		WithValues("lease", klog.KRef(r.opts.SystemNamespace, LeaseName), "identity", r.opts.Identity)
	ctx = klog.NewContext(ctx, logger)
	for ctx.Err() == nil {
		if err := r.ensureNamespace(ctx); err != nil {
			logger.Error(err, "Cannot create the namespace of the grant engine's Lease; retrying")
			sleep(ctx, r.opts.RetryPeriod)
			continue
		}
		r.term(ctx)
		sleep(ctx, r.opts.RetryPeriod)
	}
}

func (r *Runner) term(parent context.Context) {
	logger := klog.FromContext(parent)
	ctx, giveUp := context.WithCancel(parent)
	defer giveUp()
	won := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(r.electionConfig(won))
	if err != nil {
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
	case leadCtx := <-won:
		logger.Info("Leading: running the grant engine")
		leading.Set(1)
		c, err := newController(r.cfg, r.opts)
		if err == nil {
			err = c.run(leadCtx)
		}
		if err != nil && leadCtx.Err() == nil {
			logger.Error(err, "The grant engine stopped; giving the Lease up")
		}
		leading.Set(0)
		giveUp()
		<-ended
		if parent.Err() == nil {
			logger.Info("No longer leading; the grant engine has stopped; campaigning again")
		}
	}
}

func (r *Runner) electionConfig(won chan<- context.Context) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: r.opts.SystemNamespace, Name: LeaseName},
			Client:     r.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: r.opts.Identity},
		},
		LeaseDuration:   r.opts.LeaseDuration,
		RenewDeadline:   r.opts.RenewDeadline,
		RetryPeriod:     r.opts.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { won <- ctx },
			OnStoppedLeading: func() {},
		},
	}
}

func (r *Runner) ensureNamespace(ctx context.Context) error {
	_, err := r.kube.CoreV1().Namespaces().Get(ctx, r.opts.SystemNamespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.opts.SystemNamespace}}, metav1.CreateOptions{})
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
