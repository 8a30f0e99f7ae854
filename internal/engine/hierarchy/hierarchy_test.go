package hierarchy

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotaplane/quotaplane/internal/quota"
)

func TestParseParentRelation(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    ParentRelation
		wantErr bool
	}{
		"project under organization": {in: "Project.resourcemanager.miloapis.com=Organization.resourcemanager.miloapis.com:org",
			want: ParentRelation{Child: quota.GroupKind{Group: "resourcemanager.miloapis.com", Kind: "Project"},
				Parent: quota.GroupKind{Group: "resourcemanager.miloapis.com", Kind: "Organization"}, Label: "org"}},
		"core group": {in: "Namespace=Team.x.io:team",
			want: ParentRelation{Child: quota.GroupKind{Kind: "Namespace"}, Parent: quota.GroupKind{Group: "x.io", Kind: "Team"}, Label: "team"}},
		"no label":  {in: "Project.a=Organization.a", wantErr: true},
		"no parent": {in: "Project.a=:l", wantErr: true},
		"empty":     {in: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseParentRelation(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v; want error %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
