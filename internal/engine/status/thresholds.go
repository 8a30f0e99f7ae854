package status

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Thresholds tell a tenant watching its namespace that a bucket is filling
// up, without Prometheus: the bucket's condition ApproachingLimit and an Event
// when it crosses its registration's warning or critical percentage, up or
// back down. The same percentages are exported
// (milo_quota_registration_threshold_percent) for the shipped alert rules and
// dashboard, so that the three agree.

var levelReasons = []string{
	quotav1alpha1.BucketReasonBelowThresholds,
	quotav1alpha1.BucketReasonWarningThreshold,
	quotav1alpha1.BucketReasonCriticalThreshold,
}

// levelOf reads the level a stored bucket's condition says it is at.
func levelOf(conds []metav1.Condition) quota.Level {
	c := meta.FindStatusCondition(conds, quotav1alpha1.BucketConditionApproachingLimit)
	if c == nil {
		return quota.LevelBelow
	}
	for l, r := range levelReasons {
		if c.Reason == r {
			return quota.Level(l)
		}
	}
	return quota.LevelBelow
}

// RegistrationFor finds the registration of a resource type in a cache of
// registrations: the active one, or any.
func RegistrationFor(registrations toolscache.Store, resourceType string) *quotav1alpha1.ResourceRegistration {
	var found *quotav1alpha1.ResourceRegistration
	for _, obj := range registrations.List() {
		r, ok := obj.(*quotav1alpha1.ResourceRegistration)
		if !ok || string(r.Spec.ResourceType) != resourceType {
			continue
		}
		if meta.IsStatusConditionTrue(r.Status.Conditions, quotav1alpha1.RegistrationConditionActive) || found == nil {
			found = r
		}
	}
	return found
}

// setThresholdCondition sets want's ApproachingLimit condition from st and
// the stored bucket's previous level.
func (w *BucketWriter) setThresholdCondition(want *quotav1alpha1.AllowanceBucketStatus, stored *quotav1alpha1.AllowanceBucket, st quota.BucketStatus) {
	th := convert.Thresholds(w.Registration(st.ID.ResourceType))
	pct := quota.PercentUsed(st.Allocated, st.Limit)
	level := quota.ThresholdLevel(pct, levelOf(stored.Status.Conditions), th)
	c := metav1.Condition{
		Type: quotav1alpha1.BucketConditionApproachingLimit, Status: metav1.ConditionTrue, Reason: levelReasons[level],
		ObservedGeneration: stored.Generation,
		Message: fmt.Sprintf("%d of the limit %d allocated (%.0f%%); warning at %d%%, critical at %d%%",
			st.Allocated, st.Limit, pct, th.Warning, th.Critical),
	}
	if level == quota.LevelBelow {
		c.Status = metav1.ConditionFalse
	}
	meta.SetStatusCondition(&want.Conditions, c)
}

// thresholdCrossed records an Event on a bucket whose level changed from
// what was stored to what was just written.
func (w *BucketWriter) thresholdCrossed(stored *quotav1alpha1.AllowanceBucket, written quotav1alpha1.AllowanceBucketStatus) {
	before, after := levelOf(stored.Status.Conditions), levelOf(written.Conditions)
	if before == after {
		return
	}
	c := meta.FindStatusCondition(written.Conditions, quotav1alpha1.BucketConditionApproachingLimit)
	if c == nil {
		return
	}
	kind := corev1.EventTypeWarning
	if after < before {
		kind = corev1.EventTypeNormal
	}
	w.Events().Event(stored, kind, c.Reason, c.Message)
}

// overLimitChanged records an Event on a bucket whose OverLimit condition
// changed from what was stored to what was just written: a Warning when its
// allocation came to exceed its limit (a grant lowered, removed or
// expired), a Normal one when it is back under.
func (w *BucketWriter) overLimitChanged(stored *quotav1alpha1.AllowanceBucket, written quotav1alpha1.AllowanceBucketStatus) {
	before := meta.IsStatusConditionTrue(stored.Status.Conditions, quotav1alpha1.BucketConditionOverLimit)
	c := meta.FindStatusCondition(written.Conditions, quotav1alpha1.BucketConditionOverLimit)
	if c == nil || before == (c.Status == metav1.ConditionTrue) || w.Events == nil {
		return
	}
	kind := corev1.EventTypeWarning
	if c.Status != metav1.ConditionTrue {
		kind = corev1.EventTypeNormal
	}
	w.Events().Event(stored, kind, c.Reason, c.Message)
}
