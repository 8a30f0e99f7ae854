package kubecontrollers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaseName is the Lease, in Options.Namespace, on which the replicas of
// quotaplane serve elect the one that runs the controllers.
const LeaseName = "quotaplane-kube-controllers"

// Options configure the controllers' leader election.
type Options struct {
	// Namespace holds the Lease; it is created when missing.
	Namespace string
	// Identity names this replica in the Lease. A replica restarted with the
	// same identity takes its Lease back at once.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election as
	// client-go's leaderelection does.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultOptions are the production timings; Namespace and Identity are the
// caller's.
func DefaultOptions() Options {
	return Options{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// Start returns a server component that campaigns for the Lease in the
// background and runs the controllers while this replica holds it. It returns
// at once: a replica that does not lead is ready all the same.
func Start(opts Options) func(ctx context.Context, cfg *rest.Config) error {
	return func(ctx context.Context, cfg *rest.Config) error {
		if opts.Namespace == "" || opts.Identity == "" {
			return errors.New("the controllers' leader election needs a namespace and an identity")
		}
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = 400, 800
		cfg = rest.AddUserAgent(cfg, "quotaplane-kube-controllers")
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating the controllers' client: %w", err)
		}
		c := &campaign{opts: opts, client: client, cfg: cfg}
		if _, err := leaderelection.NewLeaderElector(c.electionConfig(nil)); err != nil {
			return fmt.Errorf("configuring the controllers' leader election: %w", err)
		}
		logger := klog.FromContext(ctx).WithName("kubecontrollers").
			WithValues("lease", klog.KRef(opts.Namespace, LeaseName), "identity", opts.Identity)
		go c.run(klog.NewContext(ctx, logger))
		return nil
	}
}

type campaign struct {
	opts   Options
	client kubernetes.Interface
	cfg    *rest.Config
}

// run campaigns until ctx is done. Each won term runs the controllers until
// the Lease is lost; they have stopped before this replica campaigns again.
func (c *campaign) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		if err := c.ensureNamespace(ctx); err != nil {
			logger.Error(err, "Cannot create the namespace of the controllers' Lease; retrying")
			sleep(ctx, c.opts.RetryPeriod)
			continue
		}
		c.term(ctx)
		sleep(ctx, c.opts.RetryPeriod)
	}
}

// term campaigns once and, if elected, runs the controllers until the Lease
// is lost or ctx is done.
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
		logger.Info("Leading: running the garbage collector, namespace and ResourceQuota controllers")
		if err := run(leadCtx, c.cfg); err != nil && leadCtx.Err() == nil {
			logger.Error(err, "The controllers could not run; giving the Lease up")
		}
		giveUp()
		<-ended
		if parent.Err() == nil {
			logger.Info("No longer leading; the controllers have stopped; campaigning again")
		}
	}
}

// electionConfig is the leader election on the Lease. leading receives the
// context of a won term.
func (c *campaign) electionConfig(leading chan<- context.Context) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: c.opts.Namespace, Name: LeaseName},
			Client:     c.client.CoordinationV1(),
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
	_, err := c.client.CoreV1().Namespaces().Get(ctx, c.opts.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.opts.Namespace}}, metav1.CreateOptions{})
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
