package engine

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
)

// rebuildPoll is how often a term looks for a request of a new term.
const rebuildPoll = time.Second

// rebuildSettle bounds how long a new term waits for its first writes
// (buckets, grants in flight) before it says a requested rebuild is done.
const rebuildSettle = 30 * time.Second

// answerRebuild runs for the whole term: it says a pending request is done
// once this term's first writes are made (every term rebuilds from storage),
// then ends the term (endTerm) when a newer request comes.
func (t *term) answerRebuild(ctx context.Context, endTerm func()) {
	cms := t.r.kube.CoreV1().ConfigMaps(t.r.opts.SystemNamespace)
	logger := klog.FromContext(ctx)
	var answered string
	if cm, err := cms.Get(ctx, formats.RebuildName, metav1.GetOptions{}); err == nil {
		answered = cm.Data[formats.RebuildRequestedKey]
		if answered != "" && cm.Data[formats.RebuildDoneKey] != answered {
			t.waitFirstWrites(ctx)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cm, err := cms.Get(ctx, formats.RebuildName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				cm.Data[formats.RebuildDoneKey] = answered
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				return err
			})
			if err != nil && ctx.Err() == nil {
				logger.Error(err, "Saying that the requested rebuild is done failed", "configMap", formats.RebuildName)
			} else if err == nil {
				logger.Info("Rebuilt the quota state from storage, as requested", "request", answered)
			}
		}
	} else if !apierrors.IsNotFound(err) && ctx.Err() == nil {
		logger.Error(err, "Reading the rebuild requests failed; a request made now ends this term", "configMap", formats.RebuildName)
	}
	_ = wait.PollUntilContextCancel(ctx, rebuildPoll, false, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, formats.RebuildName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return cm.Data[formats.RebuildRequestedKey] != answered, nil
	})
	if ctx.Err() == nil {
		logger.Info("A new quota engine term was requested; ending this one", "configMap", formats.RebuildName)
		endTerm()
	}
}

// waitFirstWrites waits, bounded, until the term has written what its start
// queued: the buckets and the grants in flight.
func (t *term) waitFirstWrites(ctx context.Context) {
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, rebuildSettle, true, func(context.Context) (bool, error) {
		return t.settler.Queue.Len() == 0 && t.bucketQueue.Len() == 0 && t.claimQueue.Len() == 0, nil
	})
}
