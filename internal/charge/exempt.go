package charge

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// exempt reports whether no policy charges the object of a: quotaplane's
// own records and the cluster's system namespaces (not in a plane), Events
// and the quota API, decided by internal/policy/governed from where the
// object is and its kind — never from the requester, so that what serve's
// own controllers write for a tenant is charged like the tenant's writes.
// A member cluster's review is judged by the member's namespace, so its
// kube-system is exempt too. A ResourceClaim created in a plane is not
// charged by a policy, but the consumer it names is checked here: err
// refuses it.
func (ch *Charger) exempt(ctx context.Context, a admission.Attributes) (bool, error) {
	plane, inPlane := planes.From(ctx)
	if inPlane && a.GetOperation() == admission.Create && a.GetSubresource() == "" &&
		a.GetResource().GroupResource() == quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource() {
		return true, planeClaim(plane, a)
	}
	return ch.exemptions.Exempt(a.GetKind().GroupKind(), a.GetNamespace(), a.GetName(), inPlane), nil
}

// planeClaim refuses a ResourceClaim created in a plane whose consumer is
// of a kind each plane stores for itself (governed.PlaneConsumer).
func planeClaim(plane planes.Plane, a admission.Attributes) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.GetObject())
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading the ResourceClaim: %w", err))
	}
	ref, _, _ := unstructured.NestedStringMap(obj, "spec", "consumerRef")
	consumer := quotav1alpha1.ConsumerRef{APIGroup: ref["apiGroup"], Kind: ref["kind"], Namespace: ref["namespace"], Name: ref["name"]}
	if err := governed.PlaneConsumer(plane, consumer); err != nil {
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
			"this ResourceClaim, created in the control plane of %s %s, charges %s, and %v; the ResourceClaim was not created: name the plane's owner (%s %s), an Organization or a Project",
			plane.OwnerKind(), plane.Name, claimauthz.ConsumerName(consumer), err, plane.OwnerKind(), plane.Name))
	}
	return nil
}

// planeConsumer words the refusal of a claim a policy renders, for an
// object stored in plane, whose consumer is of a kind each plane stores for
// itself (err, RenderClaim's PlaneConsumer).
func planeConsumer(plane planes.Plane, f *inforce.Policy, a admission.Attributes, kind string, c *quotav1alpha1.ResourceClaim, err error) error {
	what := "the " + kind + " was not created"
	if a.GetOperation() == admission.Update {
		what = "the update was not stored"
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
		"ClaimCreationPolicy %s (generation %d) charges this %s, stored in the control plane of %s %s, to %s, and %v; %s: %s",
		f.Name, f.Generation, kind, plane.OwnerKind(), plane.Name, claimauthz.ConsumerName(c.Spec.ConsumerRef), err, what, governed.PlaneConsumerRemedy(plane)))
}

// scoped keeps the policies whose namespace scope holds the object of a
// (governed.Exemptions.OutOfScope): a policy without a namespace selector
// leaves out the exempt namespaces; one with a selector, the namespaces it
// does not select. A Namespace is judged by its own labels; a member
// cluster's namespace by its name alone (the member's labels are not known
// here); the root's by the Namespace stored.
func (ch *Charger) scoped(ctx context.Context, a admission.Attributes, policies []*inforce.Policy) ([]*inforce.Policy, error) {
	_, inPlane := planes.From(ctx)
	_, member := members.From(ctx)
	nsLabels := func(ns string) (labels.Set, error) {
		if a.GetKind().Group == "" && a.GetKind().Kind == "Namespace" {
			if m, err := meta.Accessor(a.GetObject()); err == nil {
				return governed.NamespaceLabels(ns, m.GetLabels()), nil
			}
		}
		if member {
			return governed.NamespaceLabels(ns, nil), nil
		}
		if ch.namespaces != nil {
			if n, err := ch.namespaces.Get(ns); err == nil {
				return governed.NamespaceLabels(ns, n.Labels), nil
			}
		}
		if ch.kube == nil {
			return governed.NamespaceLabels(ns, nil), nil
		}
		// Not in the cache yet (created a moment ago): read it.
		n, err := ch.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return governed.NamespaceLabels(ns, nil), nil
		}
		if err != nil {
			return nil, apierrors.NewTimeoutError(fmt.Sprintf("the labels of namespace %s, which a ClaimCreationPolicy's namespaceSelector reads, cannot be read: %v; retry", ns, err), 1)
		}
		return governed.NamespaceLabels(ns, n.Labels), nil
	}
	out := policies[:0:0]
	for _, f := range policies {
		skip, err := ch.exemptions.OutOfScope(f.Compiled.NamespaceSelector, a.GetKind().GroupKind(), a.GetNamespace(), a.GetName(), inPlane, nsLabels)
		if err != nil {
			return nil, err
		}
		if !skip {
			out = append(out, f)
		}
	}
	return out, nil
}
