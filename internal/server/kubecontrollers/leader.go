package kubecontrollers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/leader"
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
		e := leader.Election{Namespace: opts.Namespace, Lease: LeaseName, Identity: opts.Identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("configuring the controllers' leader election: %w", err)
		}
		logger := klog.FromContext(ctx).WithName("kubecontrollers").
			WithValues("lease", klog.KRef(opts.Namespace, LeaseName), "identity", opts.Identity)
		go leader.Campaign(klog.NewContext(ctx, logger), client, e, "garbage collector, namespace and ResourceQuota controllers",
			func(ctx context.Context) error { return run(ctx, cfg) })
		return nil
	}
}
