package reconcile

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Queue is a reconciler's queue of keys.
type Queue[T comparable] = workqueue.TypedRateLimitingInterface[T]

// NewQueue is a queue retrying a key with exponential backoff from base to
// limit.
func NewQueue[T comparable](base, limit time.Duration) Queue[T] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[T](base, limit))
}

// Run reconciles every key of q until q shuts down. A NotFound error means
// there is nothing to do any more; conflicts (a stale cache) are retried
// silently, other errors logged at V(2) and retried with backoff.
func Run[T comparable](ctx context.Context, q Queue[T], what string, reconcile func(context.Context, T) error) {
	RunRequeue(ctx, q, what, func(ctx context.Context, item T) (time.Duration, error) {
		if err := reconcile(ctx, item); !apierrors.IsNotFound(err) {
			return 0, err
		}
		return 0, nil
	})
}

// RunRequeue reconciles every key of q until q shuts down, retrying every
// error with backoff (conflicts, from a stale cache, silently; others logged
// at V(2)). A reconcile that succeeds returns after how long to look at its
// key again when no event will say it is due (zero: only on an event).
func RunRequeue[T comparable](ctx context.Context, q Queue[T], what string, reconcile func(context.Context, T) (time.Duration, error)) {
	for {
		item, shutdown := q.Get()
		if shutdown {
			return
		}
		after, err := reconcile(ctx, item)
		switch {
		case err != nil:
			if ctx.Err() == nil && !apierrors.IsConflict(err) {
				klog.FromContext(ctx).V(2).Info("Write failed; retrying", "what", what, "item", item, "err", err)
			}
			q.AddRateLimited(item)
		case after > 0:
			q.Forget(item)
			q.AddAfter(item, after)
		default:
			q.Forget(item)
		}
		q.Done(item)
	}
}
