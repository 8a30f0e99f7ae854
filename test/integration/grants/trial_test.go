package grants

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// TestATrialGrantsEndDoesNotMove: a policy gives each trigger a trial grant
// expiring 30 days after the trigger's creation. The grant's window is
// measured from the trigger's creationTimestamp, so neither a later
// reconcile (the policy's amount edited, the trigger relabelled) nor the
// passing of time moves it.
func TestATrialGrantsEndDoesNotMove(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicy("trial", "trial", "projects", 5, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Target.ResourceGrantTemplate.Spec.Window = &quotav1alpha1.GrantTemplateWindow{
			StartsAfter: &metav1.Duration{Duration: time.Minute}, ExpiresAfter: &metav1.Duration{Duration: 720 * time.Hour}}
	})
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	cm := w.configMap("acme", "tier", "trial")
	g := w.waitGrants(p.Name, w.NS+"/acme-trial")[0]
	created := cm.CreationTimestamp.Time
	check := func(when string, g *quotav1alpha1.ResourceGrant) {
		t.Helper()
		if g.Spec.ValidFrom == nil || !g.Spec.ValidFrom.Time.Equal(created.Add(time.Minute)) ||
			g.Spec.ExpiresAt == nil || !g.Spec.ExpiresAt.Time.Equal(created.Add(720*time.Hour)) {
			t.Fatalf("%s: the trial grant's window is %v – %v; want %s – %s (the trigger's creation %s plus the template's durations)",
				when, g.Spec.ValidFrom, g.Spec.ExpiresAt, created.Add(time.Minute), created.Add(720*time.Hour), created)
		}
	}
	check("made", &g)
	c := w.WaitCondition(&g, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse)
	if c.Reason != quotav1alpha1.GrantReasonNotYetValid {
		t.Errorf("a trial starting a minute after its trigger: Active=False %s, want NotYetValid", c.Reason)
	}

	// Reconciled again, seconds later: the amount follows the policy, the
	// window stays (a window measured from the time of the reconcile would
	// now differ by at least a second).
	time.Sleep(1100 * time.Millisecond)
	w.update(p, func() { p.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = 7 })
	w.update(cm, func() { cm.Labels["note"] = "relabelled" })
	var got quotav1alpha1.ResourceGrant
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := w.C.Get(ctx, client.ObjectKeyFromObject(&g), &got)
		return err == nil && got.Spec.Allowances[0].Buckets[0].Amount == 7, nil
	})
	if err != nil {
		t.Fatalf("the trial grant did not follow the policy's new amount: %+v", got.Spec)
	}
	check("reconciled after an edit", &got)
}

// TestATemplateWindowThatEndsBeforeItStartsIsRefused: the policy is
// refused on the field, saying what to do.
func TestATemplateWindowThatEndsBeforeItStartsIsRefused(t *testing.T) {
	w := newWorld(t, "projects")
	p := w.tierPolicyObject("backwards", "trial", "projects", 5, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Target.ResourceGrantTemplate.Spec.Window = &quotav1alpha1.GrantTemplateWindow{
			StartsAfter: &metav1.Duration{Duration: time.Hour}, ExpiresAfter: &metav1.Duration{Duration: time.Minute}}
	})
	err := w.C.Create(context.Background(), p)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.target.resourceGrantTemplate.spec.window.expiresAfter") || !strings.Contains(err.Error(), "later than startsAfter") {
		t.Fatalf("a template window ending before it starts: want 422 on spec.target.resourceGrantTemplate.spec.window.expiresAfter, got %v", err)
	}
}
