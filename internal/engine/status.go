package engine

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// writeStatus writes the condition of a grant, registration or policy.
func (t *term) writeStatus(ctx context.Context, k statusKey) error {
	switch k.kind {
	case kindGrant:
		return t.writeGrant(ctx, k.key)
	case kindRegistration:
		return t.writeRegistration(ctx, k.key)
	default:
		return t.writePolicy(ctx, k.key)
	}
}

func activeCondition(v quota.Validity, generation int64) metav1.Condition {
	c := metav1.Condition{Type: quotav1alpha1.GrantConditionActive, Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Message, ObservedGeneration: generation}
	if !v.Valid {
		c.Status = metav1.ConditionFalse
	}
	return c
}

func conditionChanged(existing []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(existing, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration
}

func (t *term) writeGrant(ctx context.Context, uid string) error {
	t.mu.Lock()
	v, ok := t.eng.GrantValidity(uid)
	k := t.grantKeys[uid]
	t.mu.Unlock()
	if !ok {
		return nil
	}
	obj, exists, err := t.grantInformer.GetStore().GetByKey(k)
	if err != nil || !exists {
		return err
	}
	g := obj.(*quotav1alpha1.ResourceGrant)
	c := activeCondition(v, g.Generation)
	if !conditionChanged(g.Status.Conditions, c) && g.Status.ObservedGeneration == g.Generation {
		return nil
	}
	updated := g.DeepCopy()
	updated.Status.ObservedGeneration = g.Generation
	meta.SetStatusCondition(&updated.Status.Conditions, c)
	return t.r.client.Status().Update(ctx, updated)
}

func (t *term) writeRegistration(ctx context.Context, name string) error {
	obj, exists, err := t.regInformer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	r := obj.(*quotav1alpha1.ResourceRegistration)
	t.mu.Lock()
	v := t.eng.RegistrationValidity(name)
	grants, claims := t.eng.RegistrationUsers(string(r.Spec.ResourceType))
	t.mu.Unlock()
	if v.Cause == quota.CauseDeleting && grants+claims > 0 {
		v.Message += "; still used by " + plural(grants, "grant") + " and " + plural(claims, "claim") + ", which are flagged invalid"
	}
	c := activeCondition(v, r.Generation)
	if !conditionChanged(r.Status.Conditions, c) && r.Status.ObservedGeneration == r.Generation {
		return nil
	}
	updated := r.DeepCopy()
	updated.Status.ObservedGeneration = r.Generation
	meta.SetStatusCondition(&updated.Status.Conditions, c)
	return t.r.client.Status().Update(ctx, updated)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writePolicy validates a ClaimCreationPolicy and writes its Ready
// condition: CEL constraints compile to bool, every template parses and
// type-checks, literals are valid, each expression's estimated cost (with
// `trigger` typed from the trigger kind's schema, when it is served) is
// within the limit, literal resource types are registered; disabled is not
// Ready.
func (t *term) writePolicy(ctx context.Context, name string) error {
	obj, exists, err := t.policyInformer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return err
	}
	cp := obj.(*quotav1alpha1.ClaimCreationPolicy)
	c := metav1.Condition{Type: quotav1alpha1.PolicyConditionReady, Status: metav1.ConditionTrue, Reason: policy.ReasonReady,
		Message: fmt.Sprintf("enforced on creates of %s", cp.Spec.Trigger.Resource.Kind), ObservedGeneration: cp.Generation}
	compiled, cerr := policy.Compile(cp, policy.Options{TriggerSchema: t.triggerSchema(ctx, cp.Spec.Trigger.Resource)})
	var perr *policy.Error
	switch {
	case errors.As(cerr, &perr):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, perr.Reason, perr.Error()
	case cerr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, policy.ReasonValidationFailed, cerr.Error()
	case cp.Spec.Disabled:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, policy.ReasonDisabled, "spec.disabled is true; creates are not charged"
	default:
		t.mu.Lock()
		err := compiled.CheckRegistered(t.eng.IsRegistered)
		if err == nil {
			err = compiled.CheckUnits(t.eng.BaseUnitQuantity)
		}
		t.mu.Unlock()
		if err != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, policy.ReasonValidationFailed, err.Error()
		}
	}
	enforced := cp.Status.Enforced
	switch {
	case c.Status == metav1.ConditionTrue:
		// This generation is valid: admission enforces it from now on,
		// also after a restart, even if a later edit is invalid.
		enforced = &quotav1alpha1.EnforcedClaimPolicy{Generation: cp.Generation, Trigger: cp.Spec.Trigger,
			Target: cp.Spec.Target, FailurePolicy: cp.Spec.FailurePolicy}
	case c.Reason != policy.ReasonDisabled && enforced != nil:
		c.Message += fmt.Sprintf("; generation %d, the last valid one, stays enforced until this is fixed", enforced.Generation)
	case c.Reason != policy.ReasonDisabled:
		c.Message += "; no generation of this policy was ever valid, so it is not enforced until this is fixed"
	}
	if !conditionChanged(cp.Status.Conditions, c) && cp.Status.ObservedGeneration == cp.Generation &&
		equality.Semantic.DeepEqual(enforced, cp.Status.Enforced) {
		return nil
	}
	updated := cp.DeepCopy()
	updated.Status.ObservedGeneration = cp.Generation
	updated.Status.Enforced = enforced
	meta.SetStatusCondition(&updated.Status.Conditions, c)
	return t.r.client.Status().Update(ctx, updated)
}

// triggerSchema is the OpenAPI schema of a policy's trigger kind, to type
// `trigger` and estimate the cost of its expressions; nil when the kind is
// not served (yet) or its schema cannot be read: the policy is then judged
// without types (no estimate; the cost limit still holds at evaluation),
// never held back.
func (t *term) triggerSchema(ctx context.Context, r quotav1alpha1.TriggerResource) *spec.Schema {
	s, err := t.r.schemas.Resolve(r.APIVersion, r.Kind)
	if err != nil {
		klog.FromContext(ctx).V(4).Info("Judging a policy without its trigger's schema", "apiVersion", r.APIVersion, "kind", r.Kind, "err", err)
		return nil
	}
	return s
}
