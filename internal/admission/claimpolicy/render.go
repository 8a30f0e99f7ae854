package claimpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/config/crd"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// claimFor makes the claim a policy renders for one create, and checks it
// exactly as the API server would check that claim created through the API
// (its metadata, its schema, its namespace existing and not terminating):
// the engine writes it to storage itself, after the object is stored, so a
// claim the API would refuse must refuse the create now.
func (p *Plugin) claimFor(f *inForce, r *policy.Rendered, a admission.Attributes, obj metav1.Object) (*quotav1alpha1.ResourceClaim, error) {
	return p.claimForObject(f, r, a, target{kind: a.GetKind(), resource: a.GetResource()}, obj)
}

// target is the kind and resource of the object charged: the request's,
// except for an update through a subresource (scale), which charges the
// object it scales.
type target struct {
	kind     schema.GroupVersionKind
	resource schema.GroupVersionResource
}

func (p *Plugin) claimForObject(f *inForce, r *policy.Rendered, a admission.Attributes, tg target, obj metav1.Object) (*quotav1alpha1.ResourceClaim, error) {
	// The template's namespace, rendered; without one, the object's
	// namespace, or the system namespace for a cluster-scoped object.
	ns := r.Namespace
	if ns == "" {
		ns = a.GetNamespace()
	}
	if ns == "" {
		ns = p.systemNamespace
	}
	// The claim's name is fixed now (it is recorded before the claim exists):
	// the template's name, or a prefix and a hash of the object and policy.
	name := r.Name
	if name == "" {
		sum := sha256.Sum256([]byte(string(obj.GetUID()) + "/" + f.name))
		suffix := hex.EncodeToString(sum[:5])
		prefix := r.GenerateName
		if prefix == "" {
			prefix = strings.ToLower(tg.kind.Kind) + "-" + obj.GetName() + "-"
		}
		if len(prefix) > 200 {
			prefix = prefix[:200]
		}
		name = prefix + suffix
	}
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels: map[string]string{},
		Annotations: map[string]string{
			quotav1alpha1.AnnotationPolicy:           f.name,
			quotav1alpha1.AnnotationPolicyGeneration: strconv.FormatInt(f.generation, 10),
			quotav1alpha1.AnnotationResource:         quotav1alpha1.FormatResource(tg.resource),
			quotav1alpha1.AnnotationResourceUID:      string(obj.GetUID()),
		},
	}, Spec: r.Spec}
	for k, v := range r.Labels {
		c.Labels[k] = v
	}
	// The template's annotations never replace quotaplane's own, which tie
	// the claim to its object and policy.
	for k, v := range r.Annotations {
		if _, ours := c.Annotations[k]; !ours {
			c.Annotations[k] = v
		}
	}
	kind := tg.kind
	c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{APIGroup: kind.Group, Kind: kind.Kind, Name: obj.GetName(), Namespace: a.GetNamespace()}
	if errs := p.claims.validate(c); len(errs) > 0 {
		return nil, apierrors.NewInternalError(fmt.Errorf(
			"ClaimCreationPolicy %s (generation %d) renders, for this %s, a ResourceClaim the API server would refuse: %v; the %s was not created: fix the policy's spec.target.resourceClaimTemplate (this is not a quota denial)",
			f.name, f.generation, kind.Kind, errs.ToAggregate(), kind.Kind))
	}
	if err := p.namespaceOpen(ns); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf(
			"ClaimCreationPolicy %s (generation %d) places the claim for this %s in namespace %s, which %v; the %s was not created: create the namespace or fix spec.target.resourceClaimTemplate.metadata.namespace (this is not a quota denial)",
			f.name, f.generation, kind.Kind, ns, err, kind.Kind))
	}
	return c, nil
}

// namespaceOpen refuses a namespace that does not exist or is terminating,
// as the API server's namespace lifecycle check would.
func (p *Plugin) namespaceOpen(ns string) error {
	if p.namespacesReady != nil && !p.namespacesReady() {
		return nil // not known yet: the engine's write finds out
	}
	n, err := p.namespaces.Get(ns)
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

// claimValidator checks a claim as the API server checks a ResourceClaim
// create: object metadata, then the CRD's schema.
type claimValidator struct {
	schema crdvalidation.SchemaCreateValidator
}

func newClaimValidator() (*claimValidator, error) {
	crds, err := crd.All()
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		if c.Spec.Names.Kind != "ResourceClaim" {
			continue
		}
		for _, v := range c.Spec.Versions {
			if v.Name != quotav1alpha1.SchemeGroupVersion.Version || v.Schema == nil {
				continue
			}
			internal := &apiextensionsinternal.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, err
			}
			s, _, err := crdvalidation.NewSchemaValidator(internal)
			if err != nil {
				return nil, err
			}
			return &claimValidator{schema: s}, nil
		}
	}
	return nil, fmt.Errorf("the ResourceClaim CRD %s has no schema", quotav1alpha1.SchemeGroupVersion)
}

func (v *claimValidator) validate(c *quotav1alpha1.ResourceClaim) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&c.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	withKind := c.DeepCopy()
	withKind.APIVersion, withKind.Kind = quotav1alpha1.SchemeGroupVersion.String(), "ResourceClaim"
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(withKind)
	if err != nil {
		return append(errs, field.InternalError(nil, err))
	}
	return append(errs, crdvalidation.ValidateCustomResource(nil, u, v.schema)...)
}

// authorizeConsumers refuses a create whose policies charge a consumer the
// requester may not charge: a policy renders its consumer from fields the
// requester wrote, so without this anyone could spend another tenant's
// quota. The check is the one ResourceClaims created through the API get:
// verb "claim" on the consumer (docs/authorization.md).
func (p *Plugin) authorizeConsumers(ctx context.Context, a admission.Attributes, applying []*inForce, claims []*quotav1alpha1.ResourceClaim) error {
	for i, c := range claims {
		if err := claimauthz.AuthorizeClaim(ctx, p.authorizer, a.GetUserInfo(), c.Spec.ConsumerRef); err != nil {
			p.reports.result(applying[i].name, resultUnauthorized)
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"ClaimCreationPolicy %s charges this %s to %s, and %v", applying[i].name, a.GetKind().Kind, claimauthz.ConsumerName(c.Spec.ConsumerRef), err))
		}
	}
	return nil
}

// denialMessage names the resource type, requested, available, limit and
// consumer of the first denied request.
func denialMessage(kind, name string, res admit.AdmitResult) string {
	// The request that is short, not a claim undone because another was.
	for _, d := range res.Decisions {
		for _, r := range d.Requests {
			if r.Reason == quota.ReasonQuotaExceeded {
				return fmt.Sprintf("insufficient quota to create %s %s: %s", kind, name, d.Message)
			}
		}
	}
	for _, d := range res.Decisions {
		if d.Outcome != quota.Granted && d.Outcome != quota.Pending {
			return fmt.Sprintf("insufficient quota to create %s %s: %s", kind, name, d.Message)
		}
	}
	return fmt.Sprintf("insufficient quota to create %s %s", kind, name)
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

func requestInfoMap(a admission.Attributes) map[string]any {
	r := a.GetResource()
	return map[string]any{
		"verb": strings.ToLower(string(a.GetOperation())), "namespace": a.GetNamespace(), "name": a.GetName(),
		"apiGroup": r.Group, "apiVersion": r.Version, "resource": r.Resource, "subresource": a.GetSubresource(),
		"dryRun": a.IsDryRun(),
	}
}
