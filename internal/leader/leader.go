package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Election names a Lease and how it is held.
type Election struct {
	// Namespace holds the Lease; it is created if missing.
	Namespace string
	// Lease is the Lease's name.
	Lease string
	// Identity names this replica in the Lease.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Validate checks an election before anything runs.
func (e Election) Validate() error {
	if e.Namespace == "" || e.Lease == "" || e.Identity == "" {
		return errors.New("leader election needs a namespace, a Lease name and an identity")
	}
	_, err := leaderelection.NewLeaderElector(e.config(e.leaseLock(nil), nil))
	return err
}

// Campaign campaigns until ctx is done. Each won term calls lead with a
// context that ends when the Lease is lost; lead has returned before this
// replica campaigns again. An error from lead gives the Lease up. what names
// the controllers in logs (the value of the key "controllers").
//
// A term whose lead returns an error wrapping ErrStop ends the campaign:
// Campaign returns that error (a replica that must not run on this cluster at
// all). Otherwise it returns nil once ctx is done.
func Campaign(ctx context.Context, kube kubernetes.Interface, e Election, what string, lead func(ctx context.Context) error) error {
	return campaign(ctx, e, what, lead, func(ctx context.Context) error { return ensureNamespace(ctx, kube, e.Namespace) }, e.leaseLock(kube))
}

// ErrStop, wrapped in the error lead returns, stops the campaign for good.
var ErrStop = errors.New("stopped campaigning")

// campaign is Campaign with its dependencies: ensureNamespace makes the
// Lease's namespace exist, lock is the Lease.
func campaign(ctx context.Context, e Election, what string, lead func(ctx context.Context) error, ensureNamespace func(context.Context) error, lock resourcelock.Interface) error {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		if err := ensureNamespace(ctx); err != nil {
			logger.Error(err, "Cannot create the namespace of the Lease; retrying", "namespace", e.Namespace)
			sleep(ctx, e.RetryPeriod)
			continue
		}
		if err := term(ctx, lock, e, what, lead); err != nil {
			return err
		}
		sleep(ctx, e.RetryPeriod)
	}
	return nil
}

// term campaigns once and, if elected, runs lead until the Lease is lost or
// ctx is done. It returns lead's error when it wraps ErrStop.
func term(parent context.Context, lock resourcelock.Interface, e Election, what string, lead func(ctx context.Context) error) error {
	logger := klog.FromContext(parent)
	ctx, giveUp := context.WithCancel(parent)
	defer giveUp()
	leading := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(e.config(lock, leading))
	if err != nil { // checked by Validate
		logger.Error(err, "Invalid leader election configuration")
		return nil
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		elector.Run(ctx)
	}()
	select {
	case <-ended:
		return nil
	case leadCtx := <-leading:
		logger.Info("Leading: running the controllers", "controllers", what)
		err := lead(klog.NewContext(leadCtx, logger))
		if err != nil && leadCtx.Err() == nil {
			logger.Error(err, "The controllers could not run; giving the Lease up", "controllers", what)
		}
		giveUp()
		<-ended
		if errors.Is(err, ErrStop) {
			return err
		}
		if parent.Err() == nil {
			logger.Info("No longer leading; the controllers have stopped; campaigning again", "controllers", what)
		}
	}
	return nil
}

// leaseLock is the Lease, through kube (nil: a lock that is only checked).
func (e Election) leaseLock(kube kubernetes.Interface) *resourcelock.LeaseLock {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Lease},
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	if kube != nil {
		lock.Client = kube.CoordinationV1()
	}
	return lock
}

// config is the election on lock; leading receives a won term's context.
func (e Election) config(lock resourcelock.Interface, leading chan<- context.Context) leaderelection.LeaderElectionConfig {
	return leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.Lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { leading <- ctx },
			OnStoppedLeading: func() {},
		},
	}
}

func ensureNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
