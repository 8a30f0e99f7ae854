package status

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Thresholds tell a tenant watching its namespace that a bucket is filling
// up, without Prometheus: the bucket's condition ApproachingLimit and an Event
// when it crosses its registration's warning or critical percentage, up or
// back down. The same percentages are exported
// (milo_quota_registration_threshold_percent) for the shipped alert rules and
// dashboard, so that the three agree.

// Default thresholds, in percent of a bucket's limit: where cloud consoles
// notify.
const (
	DefaultWarningPercent  = 80
	DefaultCriticalPercent = 95
	// hysteresisPoints: a bucket that crossed a threshold upwards falls back
	// below it only this many percentage points under it.
	hysteresisPoints = 5
)

// Threshold levels, in increasing order.
const (
	levelBelow = iota
	levelWarning
	levelCritical
)

var levelReasons = []string{
	quotav1alpha1.BucketReasonBelowThresholds,
	quotav1alpha1.BucketReasonWarningThreshold,
	quotav1alpha1.BucketReasonCriticalThreshold,
}

// Thresholds are a registration's percentages, defaults applied.
type Thresholds struct{ Warning, Critical int32 }

// ThresholdsOf are r's thresholds (the defaults for a nil r).
func ThresholdsOf(r *quotav1alpha1.ResourceRegistration) Thresholds {
	th := Thresholds{DefaultWarningPercent, DefaultCriticalPercent}
	if r != nil && r.Spec.Thresholds != nil {
		if w := r.Spec.Thresholds.Warning; w > 0 {
			th.Warning = w
		}
		if c := r.Spec.Thresholds.Critical; c > 0 {
			th.Critical = c
		}
	}
	return th
}

// percentUsed is allocated as a percentage of limit; a bucket without a
// limit is 0 % used when nothing is allocated, 100 % otherwise.
func percentUsed(allocated, limit int64) float64 {
	if limit <= 0 {
		if allocated > 0 {
			return 100
		}
		return 0
	}
	return float64(allocated) * 100 / float64(limit)
}

// thresholdLevel is the level a bucket at pct is at, given the level it was
// at: it rises as soon as pct reaches a threshold, and falls only once pct is
// hysteresisPoints under the threshold it had reached.
func thresholdLevel(pct float64, prev int, th Thresholds) int {
	level := levelBelow
	if pct >= float64(th.Warning) {
		level = levelWarning
	}
	if pct >= float64(th.Critical) {
		level = levelCritical
	}
	if prev == levelCritical && level < levelCritical && pct >= float64(th.Critical-hysteresisPoints) {
		level = levelCritical
	}
	if prev >= levelWarning && level < levelWarning && pct >= float64(th.Warning-hysteresisPoints) {
		level = levelWarning
	}
	return level
}

// levelOf reads the level a stored bucket's condition says it is at.
func levelOf(conds []metav1.Condition) int {
	c := meta.FindStatusCondition(conds, quotav1alpha1.BucketConditionApproachingLimit)
	if c == nil {
		return levelBelow
	}
	for l, r := range levelReasons {
		if c.Reason == r {
			return l
		}
	}
	return levelBelow
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
	th := ThresholdsOf(w.Registration(st.ID.ResourceType))
	pct := percentUsed(st.Allocated, st.Limit)
	level := thresholdLevel(pct, levelOf(stored.Status.Conditions), th)
	c := metav1.Condition{
		Type: quotav1alpha1.BucketConditionApproachingLimit, Status: metav1.ConditionTrue, Reason: levelReasons[level],
		ObservedGeneration: stored.Generation,
		Message: fmt.Sprintf("%d of the limit %d allocated (%.0f%%); warning at %d%%, critical at %d%%",
			st.Allocated, st.Limit, pct, th.Warning, th.Critical),
	}
	if level == levelBelow {
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
