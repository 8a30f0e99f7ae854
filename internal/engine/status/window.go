package status

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
				"a bucket now over its limit refuses new claims until usage falls under it; %s", stamp(g.Spec.ExpiresAt), extendAdvice(g, false))
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

// extendAdvice says how to keep a grant counting longer, fitting where it
// comes from (soon: it has not expired yet, and a permanent increase is
// the other way). A QuotaRequest's grant is changed by the request
// controller alone (serve refuses anyone else), and a GrantCreationPolicy's
// is rendered again from its policy within seconds of an edit: moving
// their spec.expiresAt is refused or undone.
func extendAdvice(g *quotav1alpha1.ResourceGrant, soon bool) string {
	if req := g.Labels[quotav1alpha1.LabelQuotaRequest]; req != "" {
		made := fmt.Sprintf("this grant is what QuotaRequest %s/%s gave, and only the request controller changes it", g.Namespace, req)
		if soon {
			return "to keep it, ask for a new QuotaRequest, temporary (spec.for) or permanent; " + made
		}
		return "to extend it, ask for a new QuotaRequest; " + made
	}
	if p := g.Annotations[quotav1alpha1.GrantPolicyAnnotation]; p != "" {
		change := fmt.Sprintf("change spec.target.resourceGrantTemplate.spec.window of GrantCreationPolicy %s, which made this grant and puts back any edit of it", p)
		if soon {
			return "to keep it, " + change + ", or ask for a permanent increase"
		}
		return "to extend it, " + change
	}
	if soon {
		return "move spec.expiresAt later, or ask for a permanent increase, to keep it"
	}
	return "move spec.expiresAt later to extend it"
}

func stamp(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// expiringSoon is the ExpiringSoon condition of a grant with spec.expiresAt
// in phase p, and when it next changes (zero: never); ok is false for a grant
// without an expiry.
func expiringSoon(g *quotav1alpha1.ResourceGrant, p quota.Phase, now time.Time, lead time.Duration) (c metav1.Condition, next time.Time, ok bool) {
	if g.Spec.ExpiresAt == nil {
		return c, next, false
	}
	w := convert.GrantWindow(g.Spec.ValidFrom, g.Spec.ExpiresAt)
	p = max(p, convert.RecordedPhase(g), w.Initial())
	soon, next := w.ExpiringSoon(p, now, lead)
	c = metav1.Condition{Type: quotav1alpha1.GrantConditionExpiringSoon, Status: metav1.ConditionFalse, Reason: quotav1alpha1.GrantReasonExpiresLater,
		ObservedGeneration: g.Generation, Message: fmt.Sprintf("the grant expires at %s (spec.expiresAt)", stamp(g.Spec.ExpiresAt))}
	switch {
	case soon:
		c.Status, c.Reason = metav1.ConditionTrue, quotav1alpha1.GrantReasonExpiringSoon
		c.Message = fmt.Sprintf("the grant expires at %s (spec.expiresAt), within %s: what it allows stops counting then; %s",
			stamp(g.Spec.ExpiresAt), lead, extendAdvice(g, true))
	case p == quota.PhaseExpired:
		c.Message = fmt.Sprintf("the grant expired at %s (spec.expiresAt)", stamp(g.Spec.ExpiresAt))
	}
	return c, next, true
}

// expiringSoon sets a bucket's ExpiringSoon condition: True while a grant
// counting towards it expires within the warning lead time, naming each and
// the limit left after them.
func (w *BucketWriter) expiringSoon(want *quotav1alpha1.AllowanceBucketStatus, st quota.BucketStatus) {
	if w.ExpiryWarning <= 0 {
		return
	}
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	c := metav1.Condition{Type: quotav1alpha1.BucketConditionExpiringSoon, Status: metav1.ConditionFalse, Reason: quotav1alpha1.BucketReasonNoGrantExpiringSoon,
		Message: fmt.Sprintf("no grant counting towards this bucket expires within %s", w.ExpiryWarning), ObservedGeneration: want.ObservedGeneration}
	if soon := st.ExpiringSoon(now, w.ExpiryWarning); len(soon) > 0 {
		var parts []string
		var total quota.Total
		for _, g := range soon {
			parts = append(parts, fmt.Sprintf("ResourceGrant %s/%s (%d) at %s", g.Namespace, g.Name, g.Amount, g.ExpiresAt.UTC().Format(time.RFC3339)))
			total.Add(g.Amount)
		}
		after := quota.Room(st.Limit, total.Value())
		c.Status, c.Reason = metav1.ConditionTrue, quotav1alpha1.BucketReasonGrantsExpiringSoon
		c.Message = fmt.Sprintf("%s expire%s within %s: the limit then falls from %d to %d, with %d allocated; ask for a permanent increase, or release claims, before then",
			strings.Join(parts, ", "), map[bool]string{true: "s", false: ""}[len(soon) == 1], w.ExpiryWarning, st.Limit, after, st.Allocated)
	}
	meta.SetStatusCondition(&want.Conditions, c)
}

// expiringSoonRaised records one Event when a bucket's ExpiringSoon turns
// True (the stored condition keeps it from being raised again).
func (w *BucketWriter) expiringSoonRaised(stored *quotav1alpha1.AllowanceBucket, written quotav1alpha1.AllowanceBucketStatus) {
	c := meta.FindStatusCondition(written.Conditions, quotav1alpha1.BucketConditionExpiringSoon)
	if c == nil || c.Status != metav1.ConditionTrue || meta.IsStatusConditionTrue(stored.Status.Conditions, c.Type) || w.Events == nil {
		return
	}
	w.Events().Event(stored, corev1.EventTypeWarning, c.Reason, c.Message)
}
