package policy

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// Enforcing is the version of a ClaimCreationPolicy that its stored status
// says admission enforces, for a reader of storage (quotaplane verify):
//   - the current generation, judged valid, in mode Enforce;
//   - the generation recorded in status.enforced while the current one is
//     judged invalid, or is a staged trial (mode Warn or Audit, staged);
//   - none — why says so — when the policy is disabled, the current
//     generation is not judged yet or was never valid, or it is a trial
//     that is not staged (it charges nothing).
//
// The copy returned carries the enforced generation and its spec; note
// says, for a person, when it is not the current generation.
func Enforcing(cp *quotav1alpha1.ClaimCreationPolicy) (enforced *quotav1alpha1.ClaimCreationPolicy, note, why string) {
	if cp.Spec.Disabled {
		return nil, "", "disabled"
	}
	ready := meta.FindStatusCondition(cp.Status.Conditions, quotav1alpha1.PolicyConditionReady)
	if ready == nil || ready.ObservedGeneration != cp.Generation {
		return nil, "", "not judged yet at generation " + strconv.FormatInt(cp.Generation, 10)
	}
	e := cp.Status.Enforced
	last := func() *quotav1alpha1.ClaimCreationPolicy {
		out := cp.DeepCopy()
		out.Generation = e.Generation
		out.Spec.Trigger, out.Spec.Target, out.Spec.FailurePolicy = e.Trigger, e.Target, e.FailurePolicy
		out.Spec.Mode, out.Spec.Staged = quotav1alpha1.PolicyModeEnforce, false
		return out
	}
	mode := quotav1alpha1.ModeOf(cp.Spec.Mode)
	switch {
	case ready.Status == metav1.ConditionTrue && mode == quotav1alpha1.PolicyModeEnforce:
		return cp, "", ""
	case ready.Status == metav1.ConditionTrue && cp.Spec.Staged && e != nil:
		return last(), "generation " + strconv.FormatInt(e.Generation, 10) + ", enforced while generation " +
			strconv.FormatInt(cp.Generation, 10) + " is tried in mode " + string(mode), ""
	case ready.Status == metav1.ConditionTrue:
		return nil, "", "mode " + string(mode) + ": a trial charges nothing"
	case e != nil:
		return last(), "last valid generation " + strconv.FormatInt(e.Generation, 10), ""
	}
	return nil, "", "generation " + strconv.FormatInt(cp.Generation, 10) + " was never valid"
}
