package planeserve

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/quotaplane/quotaplane/internal/planes"
)

func TestRouteOf(t *testing.T) {
	for gr, want := range map[schema.GroupResource]route{
		{Group: planes.QuotaGroup, Resource: "resourceclaims"}:                 mapped,
		{Group: planes.QuotaGroup, Resource: "resourcegrants"}:                 mapped,
		{Group: planes.QuotaGroup, Resource: "allowancebuckets"}:               mapped,
		{Group: planes.QuotaGroup, Resource: "resourceregistrations"}:          shared,
		{Group: planes.QuotaGroup, Resource: "quotarequests"}:                  refused,
		{Group: planes.QuotaGroup, Resource: "quotaapprovalrules"}:             refused,
		{Group: planes.QuotaGroup, Resource: "claimcreationpolicies"}:          refused,
		{Group: planes.QuotaGroup, Resource: "grantcreationpolicies"}:          refused,
		{Group: planes.Group, Resource: "projects"}:                            orgProjects,
		{Group: planes.Group, Resource: "organizations"}:                       refused,
		{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}: shared,
		{Group: "", Resource: "secrets"}:                                       local,
		{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:         local,
	} {
		if got := routeOf(gr); got != want {
			t.Errorf("routeOf(%s) = %d, want %d", gr, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	sa := &user.DefaultInfo{Name: "system:serviceaccount:team:guest", Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	for name, tc := range map[string]struct {
		subjects []rbacv1.Subject
		ns       string
		want     bool
	}{
		"the service account":                {[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "team", Name: "guest"}}, "default", true},
		"a service account of the binding's": {[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "guest"}}, "team", true},
		"another namespace's":                {[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "other", Name: "guest"}}, "team", false},
		"its user name":                      {[]rbacv1.Subject{{Kind: rbacv1.UserKind, Name: sa.Name}}, "", true},
		"a group of it":                      {[]rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "system:authenticated"}}, "", true},
		"another user and group":             {[]rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bob"}, {Kind: rbacv1.GroupKind, Name: "ops"}}, "", false},
		"no namespace for a service account": {[]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "guest"}}, "", false},
	} {
		if got := names(tc.subjects, tc.ns, sa); got != tc.want {
			t.Errorf("%s: names = %v, want %v", name, got, tc.want)
		}
	}
}

type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// A path a plane does not serve is refused even to a user the root allows
// everything; the paths it serves are not.
func TestAuthorizerRefusesPathsPlanesDoNotServe(t *testing.T) {
	a := &Authorizer{Root: allowAll{}}
	ctx := planes.WithPlane(context.Background(), planes.Plane{Kind: planes.Organizations, Name: "acme"})
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}
	for path, want := range map[string]authorizer.Decision{"/metrics": authorizer.DecisionDeny, "/debug/pprof/": authorizer.DecisionDeny,
		"/quota/v1alpha1/clusters/east/review": authorizer.DecisionDeny, "/version": authorizer.DecisionAllow, "/apis": authorizer.DecisionAllow} {
		got, why, _ := a.Authorize(ctx, authorizer.AttributesRecord{User: admin, Verb: "get", Path: path})
		if got != want {
			t.Errorf("%s: %v (%s), want %v", path, got, why, want)
		}
	}
}
