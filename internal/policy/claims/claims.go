package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/config/crd"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// ClaimSource is the object a policy's claim is made for, and the version of
// the policy that rendered it.
type ClaimSource struct {
	// Policy and Generation name the policy version.
	Policy     string
	Generation int64
	// Kind and Resource are the object's (for an update through the scale
	// subresource, the scaled object's).
	Kind     schema.GroupVersionKind
	Resource schema.GroupVersionResource
	// Namespace is the object's namespace, "" when it is cluster scoped.
	Namespace string
	// Object is the object's metadata: its name and UID.
	Object metav1.Object
	// SystemNamespace holds the claims of cluster-scoped objects whose
	// template names no namespace.
	SystemNamespace string
	// Plane is the control plane the object is stored in; nil at the root.
	Plane *planes.Plane
	// Cluster is the member cluster the object is stored in; "" for an
	// object of the quota plane (docs/clusters.md).
	Cluster string
}

// NewClaim is the ResourceClaim a policy renders for one object: in the
// template's namespace (else the object's, else the system namespace), under
// the template's name (else a prefix and a hash of the object's UID and the
// policy, fixed before the claim exists), tied to its object and policy by
// quotaplane's annotations, which the template's never replace. A member
// cluster's claim goes to the cluster's namespace unless the template names
// one; there, shared, its name starts with the cluster's. Admission and the
// engine's charging of existing objects make claims only through it.
func NewClaim(src ClaimSource, r *policy.Rendered) *quotav1alpha1.ResourceClaim {
	ns := r.Namespace
	if ns == "" {
		ns = src.Namespace
	}
	if ns == "" {
		ns = src.SystemNamespace
	}
	if src.Cluster != "" && r.Namespace == "" {
		// The object's namespace is the member cluster's, not the quota
		// plane's: the claim goes to the cluster's namespace here.
		ns = members.Namespace(src.Cluster)
	}
	if src.Plane != nil {
		// A plane's claims are kept in its quota namespace at the root
		// (shown in the plane's system namespace), and a template without
		// a consumer charges the plane's owner (docs/control-planes.md).
		ns = src.Plane.QuotaNamespace()
	}
	name := r.Name
	if name == "" {
		sum := sha256.Sum256([]byte(string(src.Object.GetUID()) + "/" + src.Policy))
		suffix := hex.EncodeToString(sum[:5])
		prefix := r.GenerateName
		if prefix == "" {
			prefix = strings.ToLower(src.Kind.Kind) + "-" + src.Object.GetName() + "-"
		}
		if len(prefix) > 200 {
			prefix = prefix[:200]
		}
		name = prefix + suffix
	}
	if src.Cluster != "" && ns != members.Namespace(src.Cluster) {
		// The template names a namespace every member cluster and the
		// quota plane share: two clusters' objects of one name would
		// render one claim name there (docs/clusters.md).
		name = memberName(src.Cluster, name)
	}
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name,
		Labels: map[string]string{
			quotav1alpha1.LabelAutoCreated: "true",
			quotav1alpha1.LabelPolicy:      quotav1alpha1.LabelValue(src.Policy),
			quotav1alpha1.LabelGVK:         quotav1alpha1.LabelValue(gvkLabel(src.Kind)),
		},
		Annotations: map[string]string{
			quotav1alpha1.AnnotationCreatedBy:        quotav1alpha1.ClaimCreatedBy,
			quotav1alpha1.AnnotationResourceName:     src.Object.GetName(),
			quotav1alpha1.AnnotationPolicy:           src.Policy,
			quotav1alpha1.AnnotationPolicyGeneration: strconv.FormatInt(src.Generation, 10),
			quotav1alpha1.AnnotationResource:         quotav1alpha1.FormatResource(src.Resource),
			quotav1alpha1.AnnotationResourceUID:      string(src.Object.GetUID()),
		},
	}, Spec: r.Spec}
	for k, v := range r.Labels {
		if _, ours := c.Labels[k]; !ours {
			c.Labels[k] = v
		}
	}
	for k, v := range r.Annotations {
		if _, ours := c.Annotations[k]; !ours {
			c.Annotations[k] = v
		}
	}
	// The cluster label is quotaplane's, never the template's: a claim
	// labelled for a member cluster is settled without its object being
	// looked up (docs/clusters.md).
	delete(c.Labels, members.Label)
	if src.Cluster != "" {
		c.Labels[members.Label] = src.Cluster
	}
	delete(c.Labels, quotav1alpha1.LabelPlaneNamespace) // quotaplane's, never the template's
	if src.Plane != nil {
		c.Annotations[planes.Annotation] = src.Plane.String()
		if r.Namespace != "" && r.Namespace != planes.SystemNamespace {
			// Shown in the plane's namespace the template names, where a
			// user of the plane looks for it (kubectl wait -n default).
			c.Labels[quotav1alpha1.LabelPlaneNamespace] = r.Namespace
		}
		if c.Spec.ConsumerRef.Kind == "" {
			c.Spec.ConsumerRef = quotav1alpha1.ConsumerRef{APIGroup: planes.Group, Kind: src.Plane.OwnerKind(), Name: src.Plane.Name}
		}
	}
	c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{APIGroup: src.Kind.Group, Kind: src.Kind.Kind, Name: src.Object.GetName(), Namespace: src.Namespace}
	return c
}

// memberName is the name of member cluster's claim rendered as name in a
// namespace clusters share: <cluster>-<name>, cut to a valid length with a
// hash of the whole name, the same on every webhook replica's review.
func memberName(cluster, name string) string {
	out := cluster + "-" + name
	if len(out) <= validation.DNS1123SubdomainMaxLength {
		return out
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:5])
	keep := strings.TrimRight(out[:validation.DNS1123SubdomainMaxLength-len(suffix)], "-.")
	return keep + suffix
}

// gvkLabel is the reference implementation's quota.miloapis.com/gvk value:
// <group>.<version>.<kind>, "core" for the core group.
func gvkLabel(gvk schema.GroupVersionKind) string {
	g := gvk.Group
	if g == "" {
		g = "core"
	}
	return g + "." + gvk.Version + "." + gvk.Kind
}

// ClaimValidator checks a claim as the API server checks a ResourceClaim
// create: object metadata, then the CRD's schema. Claims the engine writes
// to storage itself must pass it, since the API server never sees them.
//
// The schema is the costly part, and of a rendered claim it sees, beside the
// object's reference, only what the policy's template gives: the consumer
// and the requests. Those are checked once per distinct value (a policy's
// claims usually share one) and remembered; the object's reference and the
// metadata are checked for every claim.
type ClaimValidator struct {
	schema crdvalidation.SchemaCreateValidator

	mu sync.Mutex
	// passed are the specs, without resourceRef, the schema passed, by
	// specKey; emptied when it reaches maxPassedSpecs.
	passed map[string]struct{}
}

// maxPassedSpecs bounds what the validator remembers: a template whose
// amounts differ for every object would otherwise grow it without end.
const maxPassedSpecs = 4096

// NewClaimValidator reads the ResourceClaim schema from the embedded CRDs.
func NewClaimValidator() (*ClaimValidator, error) {
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
			return &ClaimValidator{schema: s, passed: map[string]struct{}{}}, nil
		}
	}
	return nil, fmt.Errorf("the ResourceClaim CRD %s has no schema", quotav1alpha1.SchemeGroupVersion)
}

// Validate returns what the API server would refuse of c.
func (v *ClaimValidator) Validate(c *quotav1alpha1.ResourceClaim) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&c.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	key, keyed := specKey(c)
	if keyed && resourceRefWithinSchema(c.Spec.ResourceRef) {
		v.mu.Lock()
		_, known := v.passed[key]
		v.mu.Unlock()
		if known {
			return errs
		}
	}
	schemaErrs := v.validateSchema(c)
	if len(schemaErrs) == 0 && keyed && resourceRefWithinSchema(c.Spec.ResourceRef) {
		v.mu.Lock()
		if len(v.passed) >= maxPassedSpecs {
			clear(v.passed)
		}
		v.passed[key] = struct{}{}
		v.mu.Unlock()
	}
	return append(errs, schemaErrs...)
}

// validateSchema checks c against the CRD's schema, the whole object.
func (v *ClaimValidator) validateSchema(c *quotav1alpha1.ResourceClaim) field.ErrorList {
	withKind := c.DeepCopy()
	withKind.APIVersion, withKind.Kind = quotav1alpha1.SchemeGroupVersion.String(), "ResourceClaim"
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(withKind)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return crdvalidation.ValidateCustomResource(nil, u, v.schema)
}

// specKey is what of c the schema judges besides its metadata (whose schema
// is any object) and its resourceRef: the consumer and the requests, each
// field length-prefixed. keyed is false for a claim with a status, which a
// rendered claim never has: it is always checked whole.
func specKey(c *quotav1alpha1.ResourceClaim) (key string, keyed bool) {
	if !reflect.DeepEqual(c.Status, quotav1alpha1.ResourceClaimStatus{}) {
		return "", false
	}
	var b strings.Builder
	put := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	cr := c.Spec.ConsumerRef
	put(cr.APIGroup)
	put(cr.Kind)
	put(cr.Name)
	put(cr.Namespace)
	b.WriteString(strconv.Itoa(len(c.Spec.Requests)))
	for _, r := range c.Spec.Requests {
		b.WriteByte('|')
		put(string(r.ResourceType))
		b.WriteString(strconv.FormatInt(r.Amount, 10))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(len(r.Dimensions)))
		for _, d := range r.Dimensions {
			put(d.Key)
			put(d.Value)
		}
	}
	return b.String(), true
}

// resourceRefWithinSchema reports whether r certainly passes the schema of
// spec.resourceRef (kind 1–63 characters, name 1–253, apiGroup up to 253,
// namespace up to 63). A byte count within a bound is a character count
// within it; anything else goes through the schema, for its exact error.
func resourceRefWithinSchema(r *quotav1alpha1.ResourceRef) bool {
	if r == nil {
		return true
	}
	return r.Kind != "" && len(r.Kind) <= 63 && r.Name != "" && len(r.Name) <= 253 &&
		len(r.APIGroup) <= 253 && len(r.Namespace) <= 63
}
