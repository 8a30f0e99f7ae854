package resourcemanager

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string // substrings of the errors, in order
	}{
		{"acme", nil},
		{strings.Repeat("a", 50), nil},
		{strings.Repeat("a", 51), []string{"metadata.name", "at most 50 characters (it has 51)"}},
		{"a.b", []string{"metadata.name", "must not contain dots"}},
		{"Acme", []string{"metadata.name", "RFC 1123 label"}},
		{"-acme", []string{"metadata.name", "RFC 1123 label"}},
	} {
		errs := validateName(tc.name)
		if len(tc.want) == 0 {
			if len(errs) != 0 {
				t.Errorf("validateName(%q) = %v, want none", tc.name, errs)
			}
			continue
		}
		if len(errs) == 0 {
			t.Errorf("validateName(%q): no error, want %q", tc.name, tc.want)
			continue
		}
		got := errs.ToAggregate().Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("validateName(%q) = %q, lacks %q", tc.name, got, w)
			}
		}
	}
}

func TestCreateProjectAttributes(t *testing.T) {
	u := &user.DefaultInfo{Name: "bob"}
	want := authorizer.AttributesRecord{
		User: u, Verb: "create", APIGroup: "resourcemanager.miloapis.com", APIVersion: "v1alpha1",
		Resource: "organizations", Subresource: "projects", Name: "acme", Namespace: "organization-acme", ResourceRequest: true,
	}
	if diff := cmp.Diff(want, CreateProjectAttributes(u, "acme")); diff != "" {
		t.Errorf("CreateProjectAttributes (-want +got):\n%s", diff)
	}
}
