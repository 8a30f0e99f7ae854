package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
)

// newQuotaCache makes the cache of the quota plane's ClaimCreationPolicies
// and of this cluster's ResourceClaims, indexed by their objects' UIDs.
// Making it reads the quota plane's discovery, through a mapper whose
// every request is bounded by Options.QuotaSyncTimeout: a quota plane that
// does not answer cannot hold the start.
func newQuotaCache(ctx context.Context, qcfg *rest.Config, o *Options) (crcache.Cache, error) {
	dcfg := rest.CopyConfig(qcfg)
	dcfg.Timeout = o.QuotaSyncTimeout
	discoveryHTTP, err := rest.HTTPClientFor(dcfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(dcfg, discoveryHTTP)
	if err != nil {
		return nil, err
	}
	sel := labels.SelectorFromSet(labels.Set{members.Label: o.ClusterName})
	c, err := crcache.New(qcfg, crcache.Options{Scheme: scheme, Mapper: mapper, ByObject: map[client.Object]crcache.ByObject{
		&quotav1alpha1.ResourceClaim{}: {Label: sel},
	}})
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(ctx, &quotav1alpha1.ResourceClaim{}, indexObjectUID, objectUIDIndex); err != nil {
		return nil, fmt.Errorf("indexing the ResourceClaims: %w", err)
	}
	return c, nil
}

// startQuotaCache starts the cache of the quota plane's policies and this
// cluster's claims and waits until both are read, for at most
// Options.QuotaSyncTimeout. The error says what could not start and what to
// check; nil when ctx ends first (the webhook is shutting down).
func (w *Webhook) startQuotaCache(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, w.opts.QuotaSyncTimeout)
	defer cancel()
	started := make(chan error, 1) // what Start returned: it blocks while the cache runs
	go func() { started <- w.quotaCache.Start(ctx) }()
	synced := make(chan error, 1)
	go func() {
		// The policy informer starts when it is first asked for.
		if _, err := w.quotaCache.GetInformer(sctx, &quotav1alpha1.ClaimCreationPolicy{}); err != nil {
			synced <- fmt.Errorf("reading the ClaimCreationPolicies: %w", err)
			return
		}
		if !w.quotaCache.WaitForCacheSync(sctx) {
			synced <- errors.New("the ClaimCreationPolicies and ResourceClaims were not all read")
			return
		}
		synced <- nil
	}()
	var err error
	select {
	case err = <-synced:
	case err = <-started:
		if err == nil {
			err = errors.New("it stopped")
		}
		err = fmt.Errorf("starting the cache: %w", err)
	case <-sctx.Done():
		err = sctx.Err()
	}
	switch {
	case err == nil, ctx.Err() != nil:
		return nil
	case sctx.Err() != nil, timedOut(err):
		// The discovery client's own timeout is the same bound, and may
		// fire a moment before sctx does.
		err = fmt.Errorf("not read within --quota-sync-timeout (%s): %w", w.opts.QuotaSyncTimeout, err)
	}
	return w.quotaUnreadable(err)
}

// quotaUnreadable is the error of a webhook that cannot read the quota
// plane's policies and its cluster's claims: why, and what to check.
func (w *Webhook) quotaUnreadable(err error) error {
	return fmt.Errorf("the quota plane's ClaimCreationPolicies and cluster %s's ResourceClaims could not be read: %w; "+
		"check that --quota-kubeconfig %s reaches the quota plane at %s and that the webhook's identity there is bound to ClusterRole quotaplane-member-webhook "+
		"(quotaplane webhook print-rbac prints the bindings)", w.opts.ClusterName, err, w.opts.QuotaKubeconfig, w.quotaConfig.Host)
}

// timedOut reports whether err is a timeout: a context's deadline, or a
// network or HTTP client timeout.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
