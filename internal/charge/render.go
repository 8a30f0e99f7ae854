package charge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/admission/ownerns"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// claimFor makes the claim a policy renders for one create, and checks it
// exactly as the API server would check that claim created through the API
// (its metadata, its schema, its namespace existing and not terminating):
// the engine writes it to storage itself, after the object is stored, so a
// claim the API would refuse must refuse the create now.
func (ch *Charger) claimFor(ctx context.Context, f *inforce.Policy, r *policy.Rendered, a admission.Attributes, obj metav1.Object) (*quotav1alpha1.ResourceClaim, error) {
	return ch.claimForObject(ctx, f, r, a, target{kind: a.GetKind(), resource: a.GetResource()}, obj)
}

// target is the kind and resource of the object charged: the request's,
// except for an update through a subresource (scale), which charges the
// object it scales.
type target struct {
	kind     schema.GroupVersionKind
	resource schema.GroupVersionResource
}

func (ch *Charger) claimForObject(ctx context.Context, f *inforce.Policy, r *policy.Rendered, a admission.Attributes, tg target, obj metav1.Object) (*quotav1alpha1.ResourceClaim, error) {
	src := ClaimSource{Policy: f.Name, Generation: f.Generation, Kind: tg.kind, Resource: tg.resource,
		Namespace: a.GetNamespace(), Object: obj, SystemNamespace: ch.systemNamespace}
	if plane, ok := planes.From(ctx); ok {
		src.Plane = &plane
	}
	src.Cluster, _ = members.From(ctx)
	res := RenderClaim(src, r, ch.claims)
	c := res.Claim
	ns := c.Namespace
	kind := tg.kind
	switch res.Problem {
	case NoConsumer:
		// The reference resolves the consumer from the project control
		// plane the request came to; this request came to the root.
		return nil, apierrors.NewInternalError(fmt.Errorf(
			"ClaimCreationPolicy %s (generation %d) has no spec.target.resourceClaimTemplate.spec.consumerRef, so it charges the project whose control plane a request comes to, and this %s was created at the root control plane, which belongs to no project; the %s was not created: give the policy a consumerRef to use it here (this is not a quota denial)",
			f.Name, f.Generation, kind.Kind, kind.Kind))
	case PlaneConsumer:
		return nil, planeConsumer(*src.Plane, f, a, kind.Kind, c, res.Err)
	case Invalid:
		return nil, apierrors.NewInternalError(fmt.Errorf(
			"ClaimCreationPolicy %s (generation %d) renders, for this %s, a ResourceClaim the API server would refuse: %v; the %s was not created: fix the policy's spec.target.resourceClaimTemplate (this is not a quota denial)",
			f.Name, f.Generation, kind.Kind, res.Errs.ToAggregate(), kind.Kind))
	}
	if _, inPlane := planes.From(ctx); inPlane {
		// The plane's quota namespace is its owner's; it exists while the
		// plane is served.
	} else if err := ch.namespaceOpen(ctx, ns); err != nil && src.Cluster != "" && ns == members.Namespace(src.Cluster) {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf(
			"the quota plane holds the claims of cluster %s in namespace %s, which %v; the %s was not created: start (or restart) quotaplane webhook --cluster-name=%s, which creates it, then retry",
			src.Cluster, ns, err, kind.Kind, src.Cluster))
	} else if err != nil {
		// A tenant's namespace, made a moment after its tenant is stored
		// (one apply of an Organization and its Projects), is waited for;
		// a tenant not created yet is a status clients retry.
		w := ownerns.Waiter{Namespaces: ch.namespaces, Kube: ch.kube, Dynamic: ch.policies.Dynamic}
		what := fmt.Sprintf("The claim ClaimCreationPolicy %s makes for this %s", f.Name, kind.Kind)
		switch werr := w.Await(ctx, ns, what, a.GetResource().GroupResource(), a.GetName()); {
		case werr == nil:
			return c, nil
		case !errors.Is(werr, ownerns.ErrNotOwned):
			return nil, werr
		}
		return nil, apierrors.NewInternalError(fmt.Errorf(
			"ClaimCreationPolicy %s (generation %d) places the claim for this %s in namespace %s, which %v; the %s was not created: create the namespace or fix spec.target.resourceClaimTemplate.metadata.namespace (this is not a quota denial)",
			f.Name, f.Generation, kind.Kind, ns, err, kind.Kind))
	}
	return c, nil
}

// namespaceOpen refuses a namespace that does not exist or is terminating,
// as the API server's namespace lifecycle check would. A namespace the
// informer has not seen is looked up live before it is called missing, as
// the lifecycle check does: one created a moment ago (quotaplane webhook
// creates its cluster's, then forwards reviews) is not refused.
func (ch *Charger) namespaceOpen(ctx context.Context, ns string) error {
	if ch.namespacesReady != nil && !ch.namespacesReady() {
		return nil // not known yet: the engine's write finds out
	}
	n, err := ch.namespaces.Get(ns)
	if apierrors.IsNotFound(err) && ch.kube != nil {
		n, err = ch.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("does not exist")
	}
	if err != nil {
		return err
	}
	if n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil {
		return fmt.Errorf("is being deleted")
	}
	return nil
}

// authorizeConsumers refuses a create whose policies charge a consumer the
// requester may not charge: a policy renders its consumer from fields the
// requester wrote, so without this anyone could spend another tenant's
// quota. The check is the one ResourceClaims created through the API get:
// verb "claim" on the consumer (docs/authorization.md).
func (ch *Charger) authorizeConsumers(ctx context.Context, run *call, applying []*inforce.Policy, claims []*quotav1alpha1.ResourceClaim) error {
	a := run.Attributes
	if run.Mode == Existing {
		// A member cluster's webhook charging an object that exists there
		// already: it speaks for its cluster, no requester is known.
		return nil
	}
	plane, inPlane := planes.From(ctx)
	for i, c := range claims {
		if inPlane && c.Spec.ConsumerRef.Namespace == "" && c.Spec.ConsumerRef.APIGroup == planes.Group &&
			c.Spec.ConsumerRef.Kind == plane.OwnerKind() && c.Spec.ConsumerRef.Name == plane.Name {
			// Whoever may use a plane may charge its owner.
			continue
		}
		if err := claimauthz.AuthorizeClaim(ctx, ch.authorizer, a.GetUserInfo(), c.Spec.ConsumerRef); err != nil {
			f := applying[i]
			ch.reports.resultFor(f, resultUnauthorized)
			if f.Mode != quotav1alpha1.PolicyModeEnforce && f.Mode != "" {
				// A trial charges nothing, and still refuses: else a tenant
				// could store objects charging another tenant and wait for
				// the switch to enforce.
				return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
					"ClaimCreationPolicy %s (generation %d, mode %s) would charge this %s to %s, and %v; mode %s charges nothing, but whoever creates an object must be allowed to charge its consumer in every mode",
					f.Name, f.Generation, f.Mode, a.GetKind().Kind, claimauthz.ConsumerName(c.Spec.ConsumerRef), err, f.Mode))
			}
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"ClaimCreationPolicy %s charges this %s to %s, and %v", f.Name, a.GetKind().Kind, claimauthz.ConsumerName(c.Spec.ConsumerRef), err))
		}
	}
	return nil
}

func userMap(a admission.Attributes) map[string]any {
	u := a.GetUserInfo()
	if u == nil {
		return map[string]any{}
	}
	extra := map[string]any{}
	for k, v := range u.GetExtra() {
		extra[k] = append([]string(nil), v...)
	}
	return map[string]any{"name": u.GetName(), "uid": u.GetUID(), "groups": append([]string(nil), u.GetGroups()...), "extra": extra}
}

func requestInfoMap(ctx context.Context, a admission.Attributes) map[string]any {
	r := a.GetResource()
	m := map[string]any{
		"verb": strings.ToLower(string(a.GetOperation())), "namespace": a.GetNamespace(), "name": a.GetName(),
		"apiGroup": r.Group, "apiVersion": r.Version, "resource": r.Resource, "subresource": a.GetSubresource(),
		"dryRun": a.IsDryRun(),
		// As the reference implementation has them, from the request line.
		"isResourceRequest": true, "path": "", "parts": []string{},
	}
	if ri, ok := genericapirequest.RequestInfoFrom(ctx); ok {
		m["isResourceRequest"], m["path"] = ri.IsResourceRequest, ri.Path
		if ri.Parts != nil {
			m["parts"] = ri.Parts
		}
	}
	return m
}
