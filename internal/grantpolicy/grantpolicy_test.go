package grantpolicy

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func TestLabelValue(t *testing.T) {
	long := strings.Repeat("a", 70)
	tests := []struct {
		name, in string
		same     bool
	}{
		{"short name kept", "acme", true},
		{"dotted name kept", "acme.example.com", true},
		{"empty kept", "", true},
		{"63 characters kept", strings.Repeat("b", 63), true},
		{"64 characters hashed", strings.Repeat("b", 64), false},
		{"long hashed", long, false},
		{"long with a leading dot hashed", "." + long, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := labelValue(tc.in)
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("labelValue(%q) = %q, not a label value: %v", tc.in, got, errs)
			}
			if (got == tc.in) != tc.same {
				t.Errorf("labelValue(%q) = %q; kept as is: %v, want %v", tc.in, got, got == tc.in, tc.same)
			}
		})
	}
	if labelValue(long+"x") == labelValue(long+"y") {
		t.Error("two long values that differ only at the end share a label value")
	}
}

func TestDefaultGrantName(t *testing.T) {
	a := defaultGrantName(key{policy: "p", name: "acme"})
	if diff := cmp.Diff(a, defaultGrantName(key{policy: "p", name: "acme"})); diff != "" {
		t.Errorf("the default name is not stable (-first +second):\n%s", diff)
	}
	for _, k := range []key{{policy: "p", name: "beta"}, {policy: "q", name: "acme"}, {policy: "p", namespace: "x", name: "acme"}} {
		if defaultGrantName(k) == a {
			t.Errorf("%+v shares the default name %s", k, a)
		}
	}
	long := defaultGrantName(key{policy: strings.Repeat("p", 253), name: "acme"})
	if errs := validation.IsDNS1123Subdomain(long); len(errs) > 0 {
		t.Errorf("default name of a long policy %q: %v", long, errs)
	}
}

func grant(ns, name string, created int) *quotav1alpha1.ResourceGrant {
	return &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))}}
}

func names(gs []*quotav1alpha1.ResourceGrant) []string {
	out := []string{}
	for _, g := range gs {
		out = append(out, g.Namespace+"/"+g.Name)
	}
	return out
}

func TestPick(t *testing.T) {
	tests := []struct {
		name      string
		existing  []*quotav1alpha1.ResourceGrant
		want      desiredGrant
		keep      string
		wantStale []string
	}{
		{"none", nil, desiredGrant{name: "g", namespace: "a"}, "", []string{}},
		{"the named one is kept", []*quotav1alpha1.ResourceGrant{grant("a", "g", 1)}, desiredGrant{name: "g", namespace: "a"}, "a/g", []string{}},
		{"renamed: the old one goes", []*quotav1alpha1.ResourceGrant{grant("a", "old", 1)}, desiredGrant{name: "new", namespace: "a"}, "", []string{"a/old"}},
		{"moved: the one elsewhere goes", []*quotav1alpha1.ResourceGrant{grant("b", "g", 1), grant("a", "g", 2)}, desiredGrant{name: "g", namespace: "a"}, "a/g", []string{"b/g"}},
		{"generated: the oldest is kept, duplicates go", []*quotav1alpha1.ResourceGrant{grant("a", "g-1", 1), grant("a", "g-2", 2)},
			desiredGrant{generateName: "g-", namespace: "a"}, "a/g-1", []string{"a/g-2"}},
		{"generated with another prefix goes", []*quotav1alpha1.ResourceGrant{grant("a", "h-1", 1)},
			desiredGrant{generateName: "g-", namespace: "a"}, "", []string{"a/h-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keep, stale := pick(tc.existing, &tc.want)
			got := ""
			if keep != nil {
				got = keep.Namespace + "/" + keep.Name
			}
			if diff := cmp.Diff(tc.keep, got); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantStale, names(stale)); diff != "" {
				t.Errorf("stale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnLabelsMatchTheIndex(t *testing.T) {
	for _, k := range []key{{policy: "p", namespace: "ns", name: "cm"}, {policy: "p", name: "org"}, {policy: strings.Repeat("p", 100), name: strings.Repeat("n", 100)}} {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Labels: ownLabels(k.policy, "Kind", k.namespace, k.name),
			Annotations: ownAnnotations(k.policy, k.namespace, k.name, "uid")}}
		idx, _ := grantTriggerIndex(g)
		if diff := cmp.Diff([]string{triggerIndexValue(k.policy, k.namespace, k.name)}, idx); diff != "" {
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

// FuzzLabelValue: whatever a name is, its label value is a valid label
// value, and a value kept as is is the name itself.
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "acme", strings.Repeat("x", 64), "-._", "a/b", "ünïcode"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := labelValue(s)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Fatalf("labelValue(%q) = %q: %v", s, got, errs)
		}
		if len(validation.IsValidLabelValue(s)) == 0 && got != s {
			t.Fatalf("labelValue(%q) = %q, want it kept", s, got)
		}
	})
}
