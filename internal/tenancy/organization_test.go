package tenancy

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestSubject(t *testing.T) {
	for _, tc := range []struct {
		user string
		want rbacv1.Subject
	}{
		{"alice", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		{"system:serviceaccount:organization-beta:robot", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "organization-beta", Name: "robot"}},
		// Not a service account name: kept as a user.
		{"system:serviceaccount:broken", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:broken"}},
		{"oidc:bob@example.com", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oidc:bob@example.com"}},
	} {
		if diff := cmp.Diff(tc.want, subject(tc.user)); diff != "" {
			t.Errorf("subject(%q) (-want +got):\n%s", tc.user, diff)
		}
	}
}

func TestSummarize(t *testing.T) {
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("Project p%d", i))
	}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"Namespace organization-acme"}, "Namespace organization-acme"},
		{many, "Project p0, Project p1, Project p2, Project p3, Project p4, Project p5, Project p6, Project p7, Project p8, Project p9 and 2 more"},
	} {
		if diff := cmp.Diff(tc.want, summarize(tc.names)); diff != "" {
			t.Errorf("summarize(%v) (-want +got):\n%s", tc.names, diff)
		}
	}
}
