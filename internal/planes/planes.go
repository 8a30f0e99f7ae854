package planes

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Kind is the kind of a plane's owner, as its URL says it: "projects" or
// "organizations".
type Kind string

const (
	// Projects are the planes of Projects.
	Projects Kind = "projects"
	// Organizations are the planes of Organizations.
	Organizations Kind = "organizations"
)

// Group and Version are those of the tenancy kinds whose URLs the planes
// are served under.
const (
	Group   = "resourcemanager.miloapis.com"
	Version = "v1alpha1"
	// Subresource is the path segment after the owner's name, and the
	// subresource the authorizer is asked about when a user enters.
	Subresource = "control-plane"
)

// Annotation names, on a claim of an object stored in a plane, the plane
// ("projects/<name>"), so that the engine and verify read the object there.
const Annotation = "quota.miloapis.com/control-plane"

// SystemNamespace is the namespace every plane has for its quota objects
// (its claims, grants and buckets), named as the reference implementation
// names it, whatever the root's system namespace is.
const SystemNamespace = "milo-system"

// urlPrefix is what every plane's path starts with.
const urlPrefix = "/apis/" + Group + "/" + Version + "/"

// Plane is the control plane of one Organization or Project.
type Plane struct {
	Kind Kind
	Name string
	// UID is the owner's UID once the plane was resolved: the storage of a
	// plane is keyed by it, so that an owner deleted and created again under
	// the same name starts empty.
	UID types.UID
}

// String is the plane as the annotation and the --control-plane flags
// write it: "projects/<name>".
func (p Plane) String() string { return string(p.Kind) + "/" + p.Name }

// OwnerKind is the owner's kind: "Project" or "Organization".
func (p Plane) OwnerKind() string {
	if p.Kind == Organizations {
		return "Organization"
	}
	return "Project"
}

// Path is the URL path the plane is served at; a Kubernetes client's server
// URL is the API server's followed by it.
func (p Plane) Path() string { return urlPrefix + string(p.Kind) + "/" + p.Name + "/" + Subresource }

// KeyPrefix is the etcd key prefix (below the storage prefix) every object
// of the plane is stored under.
func (p Plane) KeyPrefix() string { return KeyRoot + string(p.Kind) + "/" + string(p.UID) }

// KeyRoot is the storage key every plane's data is under.
const KeyRoot = "/planes/"

// QuotaNamespace is the namespace at the root where the plane's claims,
// grants and buckets are kept; the plane shows them in its system
// namespace. An organization's is its namespace; a project's, project-<name>.
func (p Plane) QuotaNamespace() string {
	if p.Kind == Organizations {
		return "organization-" + p.Name
	}
	return ProjectNamespace(p.Name)
}

// ProjectNamespace is the namespace at the root that holds a project's
// quota objects (its plane's system namespace, seen from the root).
func ProjectNamespace(project string) string { return "project-" + project }

// Parse reads a plane as String writes it.
func Parse(s string) (Plane, error) {
	kind, name, ok := strings.Cut(s, "/")
	switch {
	case !ok || name == "" || strings.Contains(name, "/"):
	case Kind(kind) == Projects || Kind(kind) == Organizations:
		return Plane{Kind: Kind(kind), Name: name}, nil
	}
	return Plane{}, fmt.Errorf("control plane %q: write projects/<name> or organizations/<name>", s)
}

// SplitPath returns the plane a request path is addressed to and the path
// within the plane ("/" when it names the plane itself); ok is false for a
// path that is not a plane's.
func SplitPath(path string) (p Plane, rest string, ok bool) {
	tail, found := strings.CutPrefix(path, urlPrefix)
	if !found {
		return Plane{}, "", false
	}
	kind, tail, _ := strings.Cut(tail, "/")
	if Kind(kind) != Projects && Kind(kind) != Organizations {
		return Plane{}, "", false
	}
	name, tail, _ := strings.Cut(tail, "/")
	sub, rest, _ := strings.Cut(tail, "/")
	if name == "" || sub != Subresource {
		return Plane{}, "", false
	}
	return Plane{Kind: Kind(kind), Name: name}, "/" + rest, true
}

type contextKey struct{}

// WithPlane returns ctx for a request to plane p.
func WithPlane(ctx context.Context, p Plane) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// From returns the plane a request was made to; ok is false at the root.
func From(ctx context.Context) (Plane, bool) {
	p, ok := ctx.Value(contextKey{}).(Plane)
	return p, ok
}

// QuotaGroup is the group of the quota kinds.
const QuotaGroup = "quota.miloapis.com"

// SharedGroups are the platform's API groups: every plane reads the root's
// objects of them, and none writes them.
var SharedGroups = map[string]bool{QuotaGroup: true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"admissionregistration.k8s.io": true, "flowcontrol.apiserver.k8s.io": true}

// OwnStorage reports whether a plane stores its own objects of a resource
// (under its key prefix); false for the platform's kinds, the quota kinds
// (kept at the root) and the tenancy kinds (the root's).
func OwnStorage(gr schema.GroupResource) bool {
	return gr.Group != Group && !SharedGroups[gr.Group]
}
