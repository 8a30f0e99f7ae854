package status

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// windowStatus is the status.window of a grant in phase p of its window,
// and the Active condition c (that of a valid grant) changed to say where
// the grant stands in it. A phase the grant already shows for the same
// window is never lowered: a deposed leader's view cannot undo a later
// one's record (the write is also conditional on the resourceVersion read).
func windowStatus(g *quotav1alpha1.ResourceGrant, p quota.Phase, c *metav1.Condition, now time.Time) *quotav1alpha1.GrantWindowStatus {
	w := convert.GrantWindow(g.Spec.ValidFrom, g.Spec.ExpiresAt)
	if !w.Bounded() {
		return nil
	}
	p = max(p, convert.RecordedPhase(g), w.Initial())
	if c.Status == metav1.ConditionTrue {
		switch p {
		case quota.PhaseScheduled:
			c.Status, c.Reason = metav1.ConditionFalse, quotav1alpha1.GrantReasonNotYetValid
			c.Message = fmt.Sprintf("the grant counts from %s (spec.validFrom); until then it limits nothing", stamp(g.Spec.ValidFrom))
		case quota.PhaseExpired:
			c.Status, c.Reason = metav1.ConditionFalse, quotav1alpha1.GrantReasonExpired
			c.Message = fmt.Sprintf("the grant expired at %s (spec.expiresAt) and no longer counts; nothing it allowed was revoked: "+
				"a bucket now over its limit refuses new claims until usage falls under it; move spec.expiresAt later to extend it", stamp(g.Spec.ExpiresAt))
		default:
			if g.Spec.ExpiresAt != nil {
				c.Message += fmt.Sprintf(" until %s (spec.expiresAt)", stamp(g.Spec.ExpiresAt))
			}
		}
	}
	out := &quotav1alpha1.GrantWindowStatus{Phase: quotav1alpha1.GrantWindowPhase(p.String()), ValidFrom: g.Spec.ValidFrom, ExpiresAt: g.Spec.ExpiresAt, Since: metav1.NewTime(now.UTC().Truncate(time.Second))}
	if old := g.Status.Window; old != nil && old.Phase == out.Phase && convert.RecordedPhase(g) == p {
		out.Since = old.Since
	}
	return out
}

// windowEvent is the Event a grant's phase change is told with, if any.
func windowEvent(g *quotav1alpha1.ResourceGrant, w *quotav1alpha1.GrantWindowStatus, c metav1.Condition) (eventType, reason, message string, ok bool) {
	if w == nil || (g.Status.Window != nil && g.Status.Window.Phase == w.Phase) {
		return "", "", "", false
	}
	switch w.Phase {
	case quotav1alpha1.GrantWindowActive:
		if g.Spec.ValidFrom == nil {
			return "", "", "", false // counted from its creation: nothing started
		}
		return corev1.EventTypeNormal, "GrantStarted", fmt.Sprintf("the grant counts from now (spec.validFrom %s)", stamp(g.Spec.ValidFrom)), true
	case quotav1alpha1.GrantWindowExpired:
		return corev1.EventTypeNormal, quotav1alpha1.GrantReasonExpired, c.Message, true
	}
	return "", "", "", false
}

func stamp(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
