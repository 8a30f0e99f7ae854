package policystatus

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// Problem is what holds back the grant of one trigger object.
type Problem struct{ Reason, Message string }

// maxListed bounds how many held-back grants a condition message names.
const maxListed = 3

// Synced is the policy's GrantsSynced condition: True when nothing holds a
// grant back, else the first problems (waiting for a namespace first).
func Synced(p *quotav1alpha1.GrantCreationPolicy, active bool, held []Problem) metav1.Condition {
	cond := metav1.Condition{Type: quotav1alpha1.GrantPolicyConditionGrantsSynced, ObservedGeneration: p.Generation}
	if !active {
		cond.Status, cond.Reason = metav1.ConditionFalse, quotav1alpha1.GrantPolicyReasonNotReconciling
		cond.Message = "the policy is not Ready: the grants it made are kept, and none is made, changed or removed"
		return cond
	}
	if len(held) == 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, quotav1alpha1.GrantPolicyReasonGrantsSynced
		cond.Message = "no grant of this policy is held back"
		return cond
	}
	first := slices.Clone(held) // the caller's order is its own
	sort.Slice(first, func(i, j int) bool {
		if first[i].Reason != first[j].Reason {
			return first[i].Reason > first[j].Reason // WaitingForNamespace first
		}
		return first[i].Message < first[j].Message
	})
	msgs := make([]string, 0, maxListed)
	for i := 0; i < len(first) && i < maxListed; i++ {
		msgs = append(msgs, first[i].Message)
	}
	cond.Status, cond.Reason = metav1.ConditionFalse, first[0].Reason
	cond.Message = strings.Join(msgs, "; ")
	if len(held) > maxListed {
		cond.Message += fmt.Sprintf("; and %d more", len(held)-maxListed)
	}
	return cond
}

// Write writes the policy's Ready condition, the only one in its
// conditions as in the reference implementation, and beside them
// status.grantsSynced (dropping a GrantsSynced condition an older
// quotaplane wrote into the list).
func Write(ctx context.Context, status client.SubResourceWriter, recorder record.EventRecorder, p *quotav1alpha1.GrantCreationPolicy, ready, synced metav1.Condition, parent *metav1.Condition, warnings []policy.Warning) error {
	typeChecking, checked := policy.TypeChecking(warnings, p.Generation)
	changed := p.Status.ObservedGeneration != p.Generation || !equality.Semantic.DeepEqual(typeChecking, p.Status.TypeChecking) ||
		(checked == nil) != (meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.PolicyConditionTypeChecked) == nil) ||
		(checked != nil && conditionChanged(meta.FindStatusCondition(p.Status.Conditions, checked.Type), *checked)) ||
		meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.GrantPolicyConditionGrantsSynced) != nil
	if old := meta.FindStatusCondition(p.Status.Conditions, ready.Type); conditionChanged(old, ready) {
		changed = true
	}
	if conditionChanged(p.Status.GrantsSynced, synced) {
		changed = true
	}
	if parent != nil {
		if old := meta.FindStatusCondition(p.Status.Conditions, parent.Type); conditionChanged(old, *parent) {
			changed = true
		}
	} else if meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.GrantPolicyConditionParentContextReady) != nil {
		changed = true
	}
	if !changed {
		return nil
	}
	updated := p.DeepCopy()
	meta.RemoveStatusCondition(&updated.Status.Conditions, quotav1alpha1.GrantPolicyConditionParentContextReady)
	if parent != nil {
		if old := meta.FindStatusCondition(p.Status.Conditions, parent.Type); old != nil {
			meta.SetStatusCondition(&updated.Status.Conditions, *old)
		}
		meta.SetStatusCondition(&updated.Status.Conditions, *parent)
	}
	updated.Status.ObservedGeneration = p.Generation
	meta.RemoveStatusCondition(&updated.Status.Conditions, quotav1alpha1.GrantPolicyConditionGrantsSynced)
	meta.SetStatusCondition(&updated.Status.Conditions, ready)
	synced.LastTransitionTime = metav1.Now()
	if old := p.Status.GrantsSynced; old != nil && old.Status == synced.Status {
		synced.LastTransitionTime = old.LastTransitionTime
	}
	updated.Status.GrantsSynced = &synced
	updated.Status.TypeChecking = typeChecking
	policy.SetTypeChecked(&updated.Status.Conditions, checked)
	if err := status.Update(ctx, updated); err != nil {
		return fmt.Errorf("writing the status of GrantCreationPolicy %s: %w", p.Name, err)
	}
	if ready := meta.FindStatusCondition(updated.Status.Conditions, quotav1alpha1.PolicyConditionReady); ready != nil {
		if old := meta.FindStatusCondition(p.Status.Conditions, ready.Type); old == nil || old.Reason != ready.Reason {
			t := corev1.EventTypeNormal
			if ready.Status != metav1.ConditionTrue {
				t = corev1.EventTypeWarning
			}
			recorder.Event(updated, t, ready.Reason, ready.Message)
		}
	}
	return nil
}

// Parent is the ParentContextReady condition of a policy with a parent
// context (nil without one): False while a trigger's parent cannot be
// resolved.
func Parent(p *quotav1alpha1.GrantCreationPolicy, held []Problem) *metav1.Condition {
	if p.Spec.Target.ParentContext == nil {
		return nil
	}
	cond := metav1.Condition{Type: quotav1alpha1.GrantPolicyConditionParentContextReady, ObservedGeneration: p.Generation,
		Status: metav1.ConditionTrue, Reason: quotav1alpha1.GrantPolicyReasonParentContextResolved,
		Message: "every grant's parent context is resolved"}
	var msgs []string
	for _, pr := range held {
		if pr.Reason == quotav1alpha1.GrantPolicyReasonParentContextNotFound {
			msgs = append(msgs, pr.Message)
		}
	}
	if len(msgs) > 0 {
		sort.Strings(msgs)
		if len(msgs) > maxListed {
			msgs = append(msgs[:maxListed], fmt.Sprintf("and %d more", len(msgs)-maxListed))
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, quotav1alpha1.GrantPolicyReasonParentContextNotFound, strings.Join(msgs, "; ")
	}
	return &cond
}

func conditionChanged(old *metav1.Condition, c metav1.Condition) bool {
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration
}
