package grantpolicy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/grantpolicy/render"
)

func TestOwnLabelsMatchTheIndex(t *testing.T) {
	for _, k := range []key{{policy: "p", namespace: "ns", name: "cm"}, {policy: "p", name: "org"}, {policy: strings.Repeat("p", 100), name: strings.Repeat("n", 100)}} {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Labels: render.OwnLabels(k.policy, "Kind", k.namespace, k.name),
			Annotations: render.OwnAnnotations(k.policy, k.namespace, k.name, "uid")}}
		idx, _ := grantTriggerIndex(g)
		if diff := cmp.Diff([]string{render.TriggerIndexValue(k.policy, k.namespace, k.name)}, idx); diff != "" {
			t.Errorf("%+v: index (-want +got):\n%s", k, diff)
		}
		back, ok := grantKey(g)
		if !ok || back != k {
			t.Errorf("grantKey = %+v, %v; want %+v", back, ok, k)
		}
		for l, v := range g.Labels {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("label %s=%q: %v", l, v, errs)
			}
		}
	}
}

func TestSyncedCondition(t *testing.T) {
	p := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3}}
	c := &controller{pending: map[string]map[key]problem{}}
	msgs := func(cond metav1.Condition) []string {
		return []string{string(cond.Status), cond.Reason, cond.Message}
	}
	if diff := cmp.Diff([]string{"False", quotav1alpha1.GrantPolicyReasonNotReconciling, "the policy is not Ready: the grants it made are kept, and none is made, changed or removed"},
		msgs(c.syncedCondition(p, false))); diff != "" {
		t.Errorf("inactive (-want +got):\n%s", diff)
	}
	if got := c.syncedCondition(p, true); got.Status != metav1.ConditionTrue || got.Reason != quotav1alpha1.GrantPolicyReasonGrantsSynced || got.ObservedGeneration != 3 {
		t.Errorf("nothing pending: %+v", got)
	}
	c.pending["p"] = map[key]problem{
		{policy: "p", name: "a"}: {quotav1alpha1.GrantPolicyReasonNameCollision, "collision a"},
		{policy: "p", name: "b"}: {quotav1alpha1.GrantPolicyReasonWaitingForNamespace, "waiting b"},
		{policy: "p", name: "c"}: {quotav1alpha1.GrantPolicyReasonWaitingForNamespace, "waiting c"},
		{policy: "p", name: "d"}: {quotav1alpha1.GrantPolicyReasonRenderFailed, "render d"},
	}
	if diff := cmp.Diff([]string{"False", quotav1alpha1.GrantPolicyReasonWaitingForNamespace, "waiting b; waiting c; render d; and 1 more"},
		msgs(c.syncedCondition(p, true))); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}
