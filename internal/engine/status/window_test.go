package status

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// TestAWindowIsNeverWrittenBack: the writer never writes an earlier phase
// than the grant shows for the same window (a deposed leader's stale view),
// and starts afresh for a window that was edited.
func TestAWindowIsNeverWrittenBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	until := metav1.NewTime(now.Add(time.Hour))
	g := &quotav1alpha1.ResourceGrant{Spec: quotav1alpha1.ResourceGrantSpec{ExpiresAt: &until},
		Status: quotav1alpha1.ResourceGrantStatus{Window: &quotav1alpha1.GrantWindowStatus{Phase: quotav1alpha1.GrantWindowExpired, ExpiresAt: &until, Since: metav1.NewTime(now)}}}
	c := activeCondition(quota.Validity{Valid: true, Reason: quotav1alpha1.GrantReasonActive, Message: quota.GrantActiveMessage}, 1)
	w := windowStatus(g, quota.PhaseActive, &c, now.Add(time.Minute))
	if w.Phase != quotav1alpha1.GrantWindowExpired || c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.GrantReasonExpired {
		t.Fatalf("a stale Active over a recorded Expiry: window %s, Active=%s %s; want Expired kept", w.Phase, c.Status, c.Reason)
	}
	if !w.Since.Equal(&g.Status.Window.Since) {
		t.Errorf("the phase kept its time: since %s, want %s", w.Since, g.Status.Window.Since)
	}
	// The window edited (a later expiry): the old record does not apply.
	later := metav1.NewTime(now.Add(2 * time.Hour))
	g.Spec.ExpiresAt = &later
	c = activeCondition(quota.Validity{Valid: true, Reason: quotav1alpha1.GrantReasonActive, Message: quota.GrantActiveMessage}, 2)
	w = windowStatus(g, quota.PhaseActive, &c, now.Add(time.Minute))
	if w.Phase != quotav1alpha1.GrantWindowActive || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, later.UTC().Format(time.RFC3339)) {
		t.Fatalf("an extended window: %s, Active=%s %q", w.Phase, c.Status, c.Message)
	}
	// No window: no status.window, the condition untouched.
	g.Spec.ExpiresAt = nil
	c = activeCondition(quota.Validity{Valid: true, Reason: quotav1alpha1.GrantReasonActive, Message: quota.GrantActiveMessage}, 3)
	if w := windowStatus(g, quota.PhaseUnknown, &c, now); w != nil || c.Message != quota.GrantActiveMessage {
		t.Fatalf("a grant without a window: %+v, %q", w, c.Message)
	}
}

// TestExpiringSoonFollowsTheLeadTime: False before the lead time (saying
// when it changes), True within it, False once expired.
func TestExpiringSoonFollowsTheLeadTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	until := metav1.NewTime(now.Add(10 * time.Hour))
	g := &quotav1alpha1.ResourceGrant{Spec: quotav1alpha1.ResourceGrantSpec{ExpiresAt: &until}}
	c, next, ok := expiringSoon(g, quota.PhaseActive, now, 4*time.Hour)
	if !ok || c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.GrantReasonExpiresLater || !next.Equal(now.Add(6*time.Hour)) {
		t.Fatalf("10 h before with 4 h of lead: %s %s, next %s", c.Status, c.Reason, next)
	}
	c, next, _ = expiringSoon(g, quota.PhaseActive, now.Add(7*time.Hour), 4*time.Hour)
	if c.Status != metav1.ConditionTrue || !next.Equal(until.Time) {
		t.Fatalf("3 h before: %s, next %s", c.Status, next)
	}
	c, next, _ = expiringSoon(g, quota.PhaseExpired, now.Add(11*time.Hour), 4*time.Hour)
	if c.Status != metav1.ConditionFalse || !next.IsZero() || !strings.Contains(c.Message, "expired at") {
		t.Fatalf("after the expiry: %s %q, next %s", c.Status, c.Message, next)
	}
	if _, _, ok := expiringSoon(&quotav1alpha1.ResourceGrant{}, quota.PhaseUnknown, now, time.Hour); ok {
		t.Fatal("a grant without an expiry has an ExpiringSoon condition")
	}
}

// TestExpiryAdviceFitsTheGrantsOrigin: the Expired and ExpiringSoon
// messages tell a QuotaRequest's grant to ask for a new request and a
// GrantCreationPolicy's to change the policy (naming each; moving their
// spec.expiresAt is refused or undone), and a plain grant to move
// spec.expiresAt later.
func TestExpiryAdviceFitsTheGrantsOrigin(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	until := metav1.NewTime(now.Add(time.Hour))
	for _, tc := range []struct {
		name                  string
		meta                  metav1.ObjectMeta
		wantExpired, wantSoon string
	}{
		{"a QuotaRequest's", metav1.ObjectMeta{Namespace: "organization-acme", Name: "quota-request-launch-week-x7",
			Labels:      map[string]string{quotav1alpha1.LabelQuotaRequest: "launch-week-x7"},
			Annotations: map[string]string{quotav1alpha1.LabelQuotaRequest + "-uid": "u1"}},
			"; to extend it, ask for a new QuotaRequest; this grant is what QuotaRequest organization-acme/launch-week-x7 gave, and only the request controller changes it",
			"; to keep it, ask for a new QuotaRequest, temporary (spec.for) or permanent; this grant is what QuotaRequest organization-acme/launch-week-x7 gave, and only the request controller changes it"},
		{"a GrantCreationPolicy's", metav1.ObjectMeta{Namespace: "organization-acme", Name: "acme-trial",
			Labels:      map[string]string{quotav1alpha1.GrantPolicyLabel: "trial-tier", quotav1alpha1.LabelPolicy: "trial-tier"},
			Annotations: map[string]string{quotav1alpha1.GrantPolicyAnnotation: "trial-tier"}},
			"; to extend it, change spec.target.resourceGrantTemplate.spec.window of GrantCreationPolicy trial-tier, which made this grant and puts back any edit of it",
			"; to keep it, change spec.target.resourceGrantTemplate.spec.window of GrantCreationPolicy trial-tier, which made this grant and puts back any edit of it, or ask for a permanent increase"},
		{"a plain", metav1.ObjectMeta{Namespace: "milo-system", Name: "acme-extra"},
			"; move spec.expiresAt later to extend it",
			"; move spec.expiresAt later, or ask for a permanent increase, to keep it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &quotav1alpha1.ResourceGrant{ObjectMeta: tc.meta, Spec: quotav1alpha1.ResourceGrantSpec{ExpiresAt: &until}}
			c := activeCondition(quota.Validity{Valid: true, Reason: quotav1alpha1.GrantReasonActive, Message: quota.GrantActiveMessage}, 1)
			windowStatus(g, quota.PhaseExpired, &c, now.Add(2*time.Hour))
			want := "the grant expired at " + stamp(&until) + " (spec.expiresAt) and no longer counts; nothing it allowed was revoked: " +
				"a bucket now over its limit refuses new claims until usage falls under it" + tc.wantExpired
			if c.Reason != quotav1alpha1.GrantReasonExpired || c.Message != want {
				t.Errorf("Active of %s grant past its expiry: %s %q\nwant %s %q", tc.name, c.Reason, c.Message, quotav1alpha1.GrantReasonExpired, want)
			}
			soon, _, _ := expiringSoon(g, quota.PhaseActive, now, 4*time.Hour)
			want = "the grant expires at " + stamp(&until) + " (spec.expiresAt), within 4h0m0s: what it allows stops counting then" + tc.wantSoon
			if soon.Status != metav1.ConditionTrue || soon.Message != want {
				t.Errorf("ExpiringSoon of %s grant an hour before its expiry: %s %q\nwant True %q", tc.name, soon.Status, soon.Message, want)
			}
		})
	}
}
