package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// maxTypeCheckWarnings bounds status.typeChecking (its schema's MaxItems).
const maxTypeCheckWarnings = 32

// TypeChecking is a policy's status.typeChecking and TypeChecked condition
// for what type checking found: nil and nil when nothing.
func TypeChecking(warnings []Warning, generation int64) (*quotav1alpha1.TypeChecking, *metav1.Condition) {
	if len(warnings) == 0 {
		return nil, nil
	}
	tc := &quotav1alpha1.TypeChecking{}
	var msgs []string
	for i, w := range warnings {
		if i == maxTypeCheckWarnings {
			break
		}
		tc.ExpressionWarnings = append(tc.ExpressionWarnings, quotav1alpha1.ExpressionWarning{FieldRef: w.Field, Warning: w.Message})
		msgs = append(msgs, w.Field+": "+w.Message)
	}
	msg := strings.Join(msgs, "; ")
	if len(msg) > 4096 {
		msg = msg[:4093] + "..."
	}
	return tc, &metav1.Condition{Type: quotav1alpha1.PolicyConditionTypeChecked, Status: metav1.ConditionFalse,
		Reason: quotav1alpha1.PolicyReasonTypeCheckWarnings, ObservedGeneration: generation,
		Message: msg + " (the policy is Ready: at admission, an object without such a field refuses the create)"}
}

// SetTypeChecked sets the TypeChecked condition, or removes it when there
// is nothing to say.
func SetTypeChecked(conds *[]metav1.Condition, c *metav1.Condition) {
	if c == nil {
		meta.RemoveStatusCondition(conds, quotav1alpha1.PolicyConditionTypeChecked)
		return
	}
	meta.SetStatusCondition(conds, *c)
}
