package planeserve

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// route is how a resource is stored for a request to a plane.
type route int

const (
	// local: the plane's own, under its key prefix.
	local route = iota
	// shared: the platform's, read from the root; never written in a plane.
	shared
	// mapped: kept at the root in the plane's quota namespace, shown in
	// the plane's system namespace.
	mapped
	// orgProjects: the root's Projects, only those of the organization.
	orgProjects
	// refused: not served in planes.
	refused
	// answered: created and answered, never stored (QuotaReviews: a
	// plane's review evaluates in the plane).
	answered
)

// routeOf is the route of a resource.
//
// A plane shows of the root's objects only what every user it lets in
// (down to a project's members, and whoever its RBAC binds) may read there:
// the platform's configuration that holds no tenant's data, and the
// plane's own quota objects. The quota group's other kinds are not served
// in planes (notShared).
func routeOf(gr schema.GroupResource) route {
	switch gr.Group {
	case planes.QuotaGroup:
		switch gr.Resource {
		case "resourceclaims", "resourcegrants", "allowancebuckets":
			return mapped
		case "quotareviews":
			return answered
		}
		if notShared[gr.Resource] {
			return refused
		}
		return shared
	case planes.Group:
		if gr.Resource == "projects" {
			return orgProjects
		}
		return refused
	}
	if planes.OwnStorage(gr) {
		return local
	}
	return shared
}

// notShared are the quota group's kinds no plane serves, each for what it
// holds that the users of a plane may not read at the root:
// QuotaRequests, an organization's conversation with staff (justification,
// contact; read at the root in organization-<name> by its owners and by
// staff); QuotaApprovalRules, staff's; ClaimCreationPolicies and
// GrantCreationPolicies, the platform's, whose statuses name other tenants'
// objects and projects (existing objects not charged, parents not found).
var notShared = map[string]bool{"quotarequests": true, "quotaapprovalrules": true, "claimcreationpolicies": true, "grantcreationpolicies": true}

// refusal is why a request of verb on gr is refused in plane p, "" when it
// is not.
func refusal(p planes.Plane, gr schema.GroupResource, verb string) string {
	read := verb == "get" || verb == "list" || verb == "watch"
	switch routeOf(gr) {
	case shared:
		if !read {
			return gr.String() + " are the platform's: they apply in every control plane and are changed at the root"
		}
	case refused:
		if gr.Group == planes.QuotaGroup {
			return gr.String() + " are not served in control planes: a plane shows only what every user it lets in may read; read them at the root, where RBAC decides who may (docs/control-planes.md)"
		}
		return gr.String() + " are managed at the root, not in a control plane"
	case orgProjects:
		if p.Kind != planes.Organizations {
			return "projects are created and listed in their organization's control plane, not in a project's"
		}
	case mapped:
		if !read && gr.Resource != "resourceclaims" {
			return gr.String() + " of a control plane are written by the platform: grants at the root or by a GrantCreationPolicy, buckets by the quota engine"
		}
	}
	return ""
}
