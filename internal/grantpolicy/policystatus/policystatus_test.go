package policystatus

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func TestParent(t *testing.T) {
	p := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 4}}
	if got := Parent(p, nil); got != nil {
		t.Errorf("a policy without a parent context has ParentContextReady %+v", got)
	}
	p.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{Kind: "Project", NameExpression: "trigger.metadata.name"}
	held := []Problem{{Reason: quotav1alpha1.GrantPolicyReasonWaitingForNamespace, Message: "waiting"}}
	if got := Parent(p, held); got == nil || got.Status != metav1.ConditionTrue || got.Reason != quotav1alpha1.GrantPolicyReasonParentContextResolved || got.ObservedGeneration != 4 {
		t.Errorf("nothing unresolved: %+v", got)
	}
	held = append(held, Problem{Reason: quotav1alpha1.GrantPolicyReasonParentContextNotFound, Message: "Project b: its parent context Project b does not exist"},
		Problem{Reason: quotav1alpha1.GrantPolicyReasonParentContextNotFound, Message: "Project a: its parent context Project a does not exist"})
	got := Parent(p, held)
	want := "Project a: its parent context Project a does not exist; Project b: its parent context Project b does not exist"
	if got == nil || got.Status != metav1.ConditionFalse || got.Reason != quotav1alpha1.GrantPolicyReasonParentContextNotFound || got.Message != want {
		t.Errorf("two unresolved: %+v, want False %s %q", got, quotav1alpha1.GrantPolicyReasonParentContextNotFound, want)
	}
}

// TestSyncedLeavesTheCallersProblems: the condition names the problems
// waiting for a namespace first, then by message, and the caller's list
// keeps its order.
func TestSyncedLeavesTheCallersProblems(t *testing.T) {
	p := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2}}
	held := []Problem{
		{Reason: quotav1alpha1.GrantPolicyReasonParentContextNotFound, Message: "Project b: no parent"},
		{Reason: quotav1alpha1.GrantPolicyReasonWaitingForNamespace, Message: "Project z: waiting for its namespace"},
		{Reason: quotav1alpha1.GrantPolicyReasonParentContextNotFound, Message: "Project a: no parent"},
	}
	before := slices.Clone(held)
	got := Synced(p, true, held)
	want := "Project z: waiting for its namespace; Project a: no parent; Project b: no parent"
	if got.Status != metav1.ConditionFalse || got.Reason != quotav1alpha1.GrantPolicyReasonWaitingForNamespace || got.Message != want {
		t.Errorf("Synced() = %s %s %q; want False %s %q", got.Status, got.Reason, got.Message, quotav1alpha1.GrantPolicyReasonWaitingForNamespace, want)
	}
	if diff := cmp.Diff(before, held); diff != "" {
		t.Errorf("the caller's problems were reordered (-before +after):\n%s", diff)
	}
}
