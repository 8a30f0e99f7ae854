package claimpolicy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
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
func (p *Plugin) exempt(ctx context.Context, a admission.Attributes) (bool, error) {
	plane, inPlane := planes.From(ctx)
	if inPlane && a.GetOperation() == admission.Create && a.GetSubresource() == "" &&
		a.GetResource().GroupResource() == quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource() {
		return true, planeClaim(plane, a)
	}
	return p.exemptions.Exempt(a.GetKind().GroupKind(), a.GetNamespace(), a.GetName(), inPlane), nil
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

// planeConsumer refuses a claim a policy renders, for an object stored in
// a plane, whose consumer is of a kind each plane stores for itself.
func planeConsumer(ctx context.Context, f *inForce, a admission.Attributes, kind string, c *quotav1alpha1.ResourceClaim) error {
	plane, ok := planes.From(ctx)
	if !ok {
		return nil
	}
	err := governed.PlaneConsumer(plane, c.Spec.ConsumerRef)
	if err == nil {
		return nil
	}
	what := "the " + kind + " was not created"
	if a.GetOperation() == admission.Update {
		what = "the update was not stored"
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
		"ClaimCreationPolicy %s (generation %d) charges this %s, stored in the control plane of %s %s, to %s, and %v; %s: %s",
		f.name, f.generation, kind, plane.OwnerKind(), plane.Name, claimauthz.ConsumerName(c.Spec.ConsumerRef), err, what, governed.PlaneConsumerRemedy(plane)))
}
