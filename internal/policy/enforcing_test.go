package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// TestEnforcingFollowsModeAndStatus: what verify judges is what admission
// enforces — a trial only when staged keeps the generation before it.
func TestEnforcingFollowsModeAndStatus(t *testing.T) {
	policy := func(gen int64, mode quotav1alpha1.PolicyMode, staged, valid bool, enforced int64) *quotav1alpha1.ClaimCreationPolicy {
		cp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: gen}}
		cp.Spec.Mode, cp.Spec.Staged = mode, staged
		st := metav1.ConditionTrue
		if !valid {
			st = metav1.ConditionFalse
		}
		cp.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.PolicyConditionReady, Status: st, ObservedGeneration: gen}}
		if enforced > 0 {
			cp.Status.Enforced = &quotav1alpha1.EnforcedClaimPolicy{Generation: enforced}
		}
		return cp
	}
	for _, tc := range []struct {
		name string
		cp   *quotav1alpha1.ClaimCreationPolicy
		want int64 // 0: none
	}{
		{"absent mode is Enforce", policy(3, "", false, true, 3), 3},
		{"Enforce", policy(3, quotav1alpha1.PolicyModeEnforce, false, true, 3), 3},
		{"Audit alone", policy(3, quotav1alpha1.PolicyModeAudit, false, true, 0), 0},
		{"Warn alone, a stale enforced", policy(3, quotav1alpha1.PolicyModeWarn, false, true, 2), 0},
		{"staged Audit keeps the one before", policy(3, quotav1alpha1.PolicyModeAudit, true, true, 2), 2},
		{"staged with nothing before", policy(3, quotav1alpha1.PolicyModeAudit, true, true, 0), 0},
		{"invalid keeps the last valid", policy(3, quotav1alpha1.PolicyModeEnforce, false, false, 2), 2},
		{"never valid", policy(3, quotav1alpha1.PolicyModeEnforce, false, false, 0), 0},
	} {
		got, _, why := Enforcing(tc.cp)
		switch {
		case tc.want == 0 && got != nil:
			t.Errorf("%s: enforces generation %d, want none", tc.name, got.Generation)
		case tc.want != 0 && (got == nil || got.Generation != tc.want):
			t.Errorf("%s: enforces %v (%s), want generation %d", tc.name, got, why, tc.want)
		case tc.want == 0 && why == "":
			t.Errorf("%s: no reason given", tc.name)
		}
	}
	d := policy(3, "", false, true, 3)
	d.Spec.Disabled = true
	if got, _, why := Enforcing(d); got != nil || why != "disabled" {
		t.Errorf("disabled: %v %q", got, why)
	}
}
