package planeserve

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// Authorizer decides requests to planes; requests at the root go to Root.
//
// A user may use a plane when the root's authorizer lets them "get" the
// owner's subresource control-plane: for a project's plane in the project's
// quota namespace (project-<name>: bind ClusterRole quotaplane-project-member
// there) or in its organization's namespace (organization owners), for an
// organization's plane in its namespace. Whoever may use a plane may do
// anything in it but what no plane allows (refusal): the platform's kinds
// are read-only there, grants and buckets are written by the platform, and
// only the root's RBAC grants impersonation.
// Anyone else is decided by the RBAC objects stored in the plane, and may
// read discovery, OpenAPI, the version and health when any of them binds
// the user. No one is allowed a non-resource path a plane does not serve
// (planes.Serves): Outer answers those 404 first.
type Authorizer struct {
	Root     authorizer.Authorizer
	Registry *Registry

	once sync.Once
	rbac authorizer.Authorizer
}

// inside is the RBAC authorizer of the plane a request is made to: its
// Roles, ClusterRoles and bindings.
func (a *Authorizer) inside() authorizer.Authorizer {
	a.once.Do(func() {
		r := planeRBAC{reg: a.Registry}
		a.rbac = rbac.New(r, r, r, r)
	})
	return a.rbac
}

// MemberRole is the ClusterRole that, bound in a project's namespace at the
// root (project-<name>), lets its subjects use the project's plane.
const MemberRole = "quotaplane-project-member"

func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	p, ok := planes.From(ctx)
	if !ok {
		return a.Root.Authorize(ctx, attrs)
	}
	if strings.HasPrefix(attrs.GetVerb(), "impersonate") { // impersonate, and constrained impersonation's impersonate:<mode>, impersonate-on:<mode>:<verb>
		// Whoever may use a plane may do anything in it, but not become
		// someone else: admission asks the root, as the user, whom it may
		// charge, so impersonating there would charge as the platform.
		// Only the root's RBAC grants impersonation, in a plane as at the
		// root.
		if d, reason, err := a.Root.Authorize(ctx, attrs); d == authorizer.DecisionAllow || err != nil {
			return d, reason, err
		}
		return authorizer.DecisionDeny, fmt.Sprintf("impersonating %s %q in the control plane of %s %s needs verb impersonate granted at the root (a plane's users and RBAC cannot grant it); act as yourself",
			attrs.GetResource(), attrs.GetName(), p.OwnerKind(), p.Name), nil
	}
	if attrs.IsResourceRequest() {
		gr := schema.GroupResource{Group: attrs.GetAPIGroup(), Resource: attrs.GetResource()}
		if why := refusal(p, gr, attrs.GetVerb()); why != "" {
			return authorizer.DecisionDeny, why, nil
		}
	} else if !planes.Serves(attrs.GetPath()) {
		// Outer answers these 404 before authorization; this holds should
		// a request reach here another way.
		return authorizer.DecisionDeny, fmt.Sprintf("%s is not served in a control plane: a control plane serves %s", attrs.GetPath(), planes.ServedPaths), nil
	}
	for _, q := range a.entry(attrs, p) {
		if d, _, _ := a.Root.Authorize(ctx, q); d == authorizer.DecisionAllow {
			return authorizer.DecisionAllow, "", nil
		}
	}
	// Anyone else: the plane's own RBAC objects decide; discovery, OpenAPI,
	// the version and health answer whoever they bind, as system:discovery
	// and system:public-info-viewer do at the root.
	if d, _, _ := a.inside().Authorize(ctx, attrs); d == authorizer.DecisionAllow {
		return authorizer.DecisionAllow, "", nil
	}
	if !attrs.IsResourceRequest() {
		if bound, _ := (planeRBAC{reg: a.Registry}).binds(ctx, attrs.GetUser()); bound {
			return authorizer.DecisionAllow, "", nil
		}
	}
	user := "system:anonymous"
	if u := attrs.GetUser(); u != nil {
		user = u.GetName()
	}
	var how string
	if p.Kind == planes.Projects {
		how = fmt.Sprintf("ask an owner of its organization to bind you to ClusterRole %s in namespace %s", MemberRole, planes.ProjectNamespace(p.Name))
	} else {
		how = fmt.Sprintf("ask an owner of the organization to bind you to ClusterRole quotaplane-organization-owner in namespace %s", p.QuotaNamespace())
	}
	return authorizer.DecisionDeny, fmt.Sprintf("user %q may not use the control plane of %s %s (it needs verb \"get\" on %s/%s named %s); %s",
		user, p.OwnerKind(), p.Name, p.Kind, planes.Subresource, p.Name, how), nil
}

// entry are the questions asked of the root's authorizer: may the user use
// plane p. Any allowed lets the user in.
func (a *Authorizer) entry(attrs authorizer.Attributes, p planes.Plane) []authorizer.AttributesRecord {
	q := authorizer.AttributesRecord{User: attrs.GetUser(), Verb: "get", APIGroup: planes.Group, APIVersion: planes.Version,
		Resource: string(p.Kind), Subresource: planes.Subresource, Name: p.Name, Namespace: p.QuotaNamespace(), ResourceRequest: true}
	qs := []authorizer.AttributesRecord{q}
	if p.Kind == planes.Projects {
		if org := a.Registry.OrganizationOf(p); org != "" {
			q.Namespace = planes.Plane{Kind: planes.Organizations, Name: org}.QuotaNamespace()
			qs = append(qs, q)
		}
	}
	return qs
}
