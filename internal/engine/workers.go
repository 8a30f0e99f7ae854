package engine

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// work runs write on every item of q until q shuts down. A failed item is
// retried with backoff; conflicts (a stale cache) are retried silently.
func work[T comparable](ctx context.Context, q workqueue.TypedRateLimitingInterface[T], what string, write func(context.Context, T) error) {
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := write(ctx, item); err != nil && !apierrors.IsNotFound(err) {
			if ctx.Err() == nil && !apierrors.IsConflict(err) {
				klog.FromContext(ctx).V(2).Info("Write failed; retrying", "what", what, "item", item, "err", err)
			}
			q.AddRateLimited(item)
		} else {
			q.Forget(item)
		}
		q.Done(item)
	}
}
