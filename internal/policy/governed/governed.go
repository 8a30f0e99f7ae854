package governed

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// DefaultExemptNamespaces are the cluster's own namespaces, exempt unless
// the operator says otherwise (--quota-exempt-namespaces). The system
// namespace is exempt whatever the flag says.
var DefaultExemptNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// FlagName is the flag of serve, controller and verify that lists the
// exempt namespaces.
const FlagName = "quota-exempt-namespaces"

// FlagUsage is the flag's help.
const FlagUsage = "Namespaces whose objects a ClaimCreationPolicy without spec.trigger.namespaceSelector does not charge (at the root and in member clusters; never in a control plane); a policy with a selector charges the namespaces it selects. " +
	"The system namespace, where quotaplane keeps its own records, is always exempt; give an empty value to exempt only it. verify must be given the same list as serve."

// Exemptions say which objects no ClaimCreationPolicy governs: quotaplane's
// own records and the cluster's system namespaces. The decision is made on
// where an object is and what kind it is, never on who writes it, so that a
// write quotaplane makes on a tenant's behalf is charged like the tenant's
// own.
type Exemptions struct {
	system     string
	namespaces map[string]bool
}

// NewExemptions exempts the system namespace and namespaces.
func NewExemptions(systemNamespace string, namespaces []string) Exemptions {
	e := Exemptions{system: systemNamespace, namespaces: map[string]bool{}}
	for _, ns := range namespaces {
		if ns = strings.TrimSpace(ns); ns != "" {
			e.namespaces[ns] = true
		}
	}
	if systemNamespace != "" {
		e.namespaces[systemNamespace] = true
	}
	return e
}

// Namespaces are the exempt namespaces, sorted.
func (e Exemptions) Namespaces() []string {
	out := make([]string, 0, len(e.namespaces))
	for ns := range e.namespaces {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

// exemptGroups are never charged, wherever: the quota API itself (a charge
// for a claim would need a claim), CRDs (installing the quota CRDs must
// never wait for quota), and Events: the record of what happened, written
// by every controller, quotaplane's included, in the namespace of the
// object they are about — a policy charging them would silence the
// cluster's account of its own refusals.
var exemptGroups = map[string]bool{quotav1alpha1.GroupName: true, "apiextensions.k8s.io": true, "events.k8s.io": true}

// Kind reports whether no policy charges objects of gk, wherever they are.
func Kind(gk schema.GroupKind) bool {
	return exemptGroups[gk.Group] || (gk.Group == "" && gk.Kind == "Event")
}

// Exempt reports whether no policy charges the object namespace/name of
// kind gk (namespace "" for a cluster-scoped object; a Namespace is judged
// by its own name, as admission sees it), stored at the root or in a member
// cluster (inPlane false) or in a control plane (inPlane true): the quota
// API, CRDs and Events anywhere, and the system namespace's objects. Which
// other namespaces a policy charges is its own scope (OutOfScope).
func (e Exemptions) Exempt(gk schema.GroupKind, namespace, name string, inPlane bool) bool {
	if Kind(gk) {
		return true
	}
	if gk.Group == "" && gk.Kind == "Namespace" {
		namespace = name
	}
	return !inPlane && namespace != "" && namespace == e.system
}

// OutOfScope reports whether a policy whose spec.trigger.namespaceSelector
// is sel (nil: unset) leaves uncharged the object namespace/name of kind gk.
// Unset, the exempt namespaces (--quota-exempt-namespaces: kube-system,
// kube-public, kube-node-lease by default) are out of its scope; set, the
// namespaces whose labels it does not select are, and the exempt list does
// not apply. nsLabels reads a namespace's labels (a Namespace's own, for a
// Namespace); it is called only when sel is set.
//
// A plane's namespaces are its tenants' own, names and labels alike: none
// is out of scope there, or a tenant could create kube-system in its plane,
// or label a namespace out of a selector, and keep anything in it free.
// Cluster-scoped objects have no namespace to select on.
func (e Exemptions) OutOfScope(sel labels.Selector, gk schema.GroupKind, namespace, name string, inPlane bool, nsLabels func(string) (labels.Set, error)) (bool, error) {
	if gk.Group == "" && gk.Kind == "Namespace" {
		namespace = name
	}
	if inPlane || namespace == "" {
		return false, nil
	}
	if sel == nil {
		return e.namespaces[namespace], nil
	}
	if namespace == e.system {
		return true, nil
	}
	set, err := nsLabels(namespace)
	if err != nil {
		return false, err
	}
	return !sel.Matches(set), nil
}

// NameLabel is the label every namespace carries with its own name
// (kubernetes.io/metadata.name): a namespace selector can name namespaces
// with it, and a tenant cannot change it.
const NameLabel = "kubernetes.io/metadata.name"

// ReadNamespaceLabels is NamespaceLabels of a Namespace as read (obj, err):
// a namespace that does not exist (NotFound) has its name label alone; any
// other error is returned.
func ReadNamespaceLabels(ns string, obj metav1.Object, err error) (labels.Set, error) {
	switch {
	case apierrors.IsNotFound(err):
		return NamespaceLabels(ns, nil), nil
	case err != nil:
		return nil, err
	}
	return NamespaceLabels(ns, obj.GetLabels()), nil
}

// NamespaceLabels are a namespace's labels as a selector matches them, with
// NameLabel set to its name whatever the object says.
func NamespaceLabels(name string, l map[string]string) labels.Set {
	set := labels.Set{}
	for k, v := range l {
		set[k] = v
	}
	set[NameLabel] = name
	return set
}

// PlaneLocal reports whether consumers of this kind are stored per control
// plane (a Namespace, a custom kind installed by the platform): in a plane,
// one of that name is the plane's own, not the root's.
func PlaneLocal(consumer quotav1alpha1.ConsumerRef) bool {
	return planes.OwnStorage(schema.GroupResource{Group: consumer.APIGroup})
}

// PlaneConsumer says why an object stored in plane p cannot be charged to
// consumer; nil when it can. A consumer is always an object of the quota
// plane's root (a ConsumerRef has no plane): a kind each plane stores for
// itself, such as Namespace, names there the plane's own object, which is
// not the root's of the same name, and charging the root's would spend the
// root's quota (and share it with every plane that has one of that name).
// Admission (governed creates and updates, ResourceClaims created in a
// plane) and the charging of existing objects decide with it.
func PlaneConsumer(p planes.Plane, consumer quotav1alpha1.ConsumerRef) error {
	if !PlaneLocal(consumer) {
		return nil
	}
	name := consumer.Kind + " " + consumer.Name
	if consumer.Namespace != "" {
		name = consumer.Kind + " " + consumer.Namespace + "/" + consumer.Name
	}
	return fmt.Errorf("a consumer is always an object of the quota plane's root, and %s in the control plane of %s %s is that plane's own (every plane stores its own %s objects), not the root's %s, whose quota it would spend",
		name, p.OwnerKind(), p.Name, consumer.Kind, name)
}

// PlaneConsumerRemedy is what to do about a policy that PlaneConsumer
// refuses in plane p.
func PlaneConsumerRemedy(p planes.Plane) string {
	return fmt.Sprintf("charge the plane's owner instead (a template without consumerRef charges %s %s; or name an Organization or a Project); "+
		"a policy's constraints cannot tell a plane's request from the root's, so a policy that charges a plane's own kind is refused in every plane (docs/kinds.md, \"Consumers across planes\")",
		p.OwnerKind(), p.Name)
}
