package render

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
			got := LabelValue(tc.in)
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("LabelValue(%q) = %q, not a label value: %v", tc.in, got, errs)
			}
			if (got == tc.in) != tc.same {
				t.Errorf("LabelValue(%q) = %q; kept as is: %v, want %v", tc.in, got, got == tc.in, tc.same)
			}
		})
	}
	if LabelValue(long+"x") == LabelValue(long+"y") {
		t.Error("two long values that differ only at the end share a label value")
	}
}

func TestDefaultName(t *testing.T) {
	a := DefaultName("p", "", "acme")
	if diff := cmp.Diff(a, DefaultName("p", "", "acme")); diff != "" {
		t.Errorf("the default name is not stable (-first +second):\n%s", diff)
	}
	for _, k := range [][3]string{{"p", "", "beta"}, {"q", "", "acme"}, {"p", "x", "acme"}} {
		if DefaultName(k[0], k[1], k[2]) == a {
			t.Errorf("%q shares the default name %s", k, a)
		}
	}
	long := DefaultName(strings.Repeat("p", 253), "", "acme")
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
		want      Grant
		keep      string
		wantStale []string
	}{
		{"none", nil, Grant{Name: "g", Namespace: "a"}, "", []string{}},
		{"the named one is kept", []*quotav1alpha1.ResourceGrant{grant("a", "g", 1)}, Grant{Name: "g", Namespace: "a"}, "a/g", []string{}},
		{"renamed: the old one goes", []*quotav1alpha1.ResourceGrant{grant("a", "old", 1)}, Grant{Name: "new", Namespace: "a"}, "", []string{"a/old"}},
		{"moved: the one elsewhere goes", []*quotav1alpha1.ResourceGrant{grant("b", "g", 1), grant("a", "g", 2)}, Grant{Name: "g", Namespace: "a"}, "a/g", []string{"b/g"}},
		{"generated: the oldest is kept, duplicates go", []*quotav1alpha1.ResourceGrant{grant("a", "g-1", 1), grant("a", "g-2", 2)},
			Grant{GenerateName: "g-", Namespace: "a"}, "a/g-1", []string{"a/g-2"}},
		{"generated with another prefix goes", []*quotav1alpha1.ResourceGrant{grant("a", "h-1", 1)},
			Grant{GenerateName: "g-", Namespace: "a"}, "", []string{"a/h-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keep, stale := Pick(tc.existing, &tc.want)
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

// FuzzLabelValue: whatever a name is, its label value is a valid label
// value, and a value kept as is is the name itself.
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "acme", strings.Repeat("x", 64), "-._", "a/b", "ünïcode"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := LabelValue(s)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Fatalf("LabelValue(%q) = %q: %v", s, got, errs)
		}
		if len(validation.IsValidLabelValue(s)) == 0 && got != s {
			t.Fatalf("LabelValue(%q) = %q, want it kept", s, got)
		}
	})
}
