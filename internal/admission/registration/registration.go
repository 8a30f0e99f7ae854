package registration

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaRegistration"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update), DynamicClient: plugininit.NewDynamicClient(PluginName)}, nil
	})
}

type plugin struct {
	*admission.Handler
	plugininit.DynamicClient
	kube kubernetes.Interface
}

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet:
// discovery says which kinds are served.
func (p *plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.kube = c }

var (
	_                admission.ValidationInterface          = &plugin{}
	_                initializer.WantsDynamicClient         = &plugin{}
	_                initializer.WantsExternalKubeClientSet = &plugin{}
	_                admission.InitializationValidator      = &plugin{}
	registrations                                           = quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations")
	registrationKind                                        = quotav1alpha1.Resource("resourceregistrations").WithVersion("").GroupResource()
	grantResource                                           = quotav1alpha1.Resource("resourcegrants")
)

// Validate refuses a second registration of a resource type.
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() == grantResource && a.GetSubresource() == "" {
		if obj, ok := plugininit.Unstructured(a.GetObject()); ok {
			p.warnUnregistered(ctx, obj)
		}
		return nil
	}
	if a.GetResource().GroupResource() != registrationKind || a.GetSubresource() != "" {
		return nil
	}
	obj, ok := plugininit.Unstructured(a.GetObject())
	if !ok {
		return nil
	}
	if q, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "baseUnitQuantity"); found {
		if err := positiveQuantity(q); err != nil {
			return apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("ResourceRegistration").GroupKind(), a.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("spec", "baseUnitQuantity"), q, err.Error()),
			})
		}
	}
	if errs := duplicateClaimingResources(obj); len(errs) > 0 {
		return apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("ResourceRegistration").GroupKind(), a.GetName(), errs)
	}
	p.warnUnservedKinds(ctx, obj)
	rt, _, _ := unstructured.NestedString(obj.Object, "spec", "resourceType")
	if rt == "" {
		return nil // the schema reports the missing field
	}
	if !strings.Contains(rt, "/") {
		// Any string is accepted, as the reference implementation accepts
		// it; the convention keeps types of different services apart.
		warning.AddWarning(ctx, "", fmt.Sprintf("spec.resourceType %q has no group: the recommended form is <service group>/<resource>, for example compute.example.com/%s, so that services' resource types cannot collide", rt, rt))
	}
	list, err := p.Client().Resource(registrations).List(ctx, metav1.ListOptions{})
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("checking whether %s is already registered: %w", rt, err))
	}
	for _, other := range list.Items {
		if other.GetName() == a.GetName() {
			continue
		}
		if otherRT, _, _ := unstructured.NestedString(other.Object, "spec", "resourceType"); otherRT == rt {
			return apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("ResourceRegistration").GroupKind(), a.GetName(), field.ErrorList{
				field.Invalid(field.NewPath("spec", "resourceType"), rt,
					fmt.Sprintf("already registered by ResourceRegistration %q; a resource type is registered once: change that registration, or delete it first", other.GetName())),
			})
		}
	}
	return nil
}

// duplicateClaimingResources refuses a kind listed twice in
// spec.claimingResources, in the reference implementation's words.
func duplicateClaimingResources(obj *unstructured.Unstructured) field.ErrorList {
	claiming, _, _ := unstructured.NestedSlice(obj.Object, "spec", "claimingResources")
	var errs field.ErrorList
	first := map[string]int{}
	for i, c := range claiming {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		group, _, _ := unstructured.NestedString(m, "apiGroup")
		kind, _, _ := unstructured.NestedString(m, "kind")
		key := group + "/" + kind
		if at, seen := first[key]; seen {
			errs = append(errs, field.Duplicate(field.NewPath("spec", "claimingResources").Index(i),
				fmt.Sprintf("duplicate claiming resource '%s' (first occurrence at index %d); list each kind once", key, at)))
			continue
		}
		first[key] = i
	}
	return errs
}

// positiveQuantity checks a base unit quantity: what one base unit is must be
// more than nothing, or amounts could not be converted.
func positiveQuantity(v any) error {
	s := fmt.Sprint(v)
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a Kubernetes quantity; write what one base unit is, for example 1Mi for a base unit of MiB or 1 for cores", s)
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("one base unit must be a positive quantity, not %s; write for example 1Mi for a base unit of MiB", s)
	}
	return nil
}

// warnUnservedKinds adds a warning (kubectl prints it) for the consumer type
// and each claiming kind the API server does not serve: the registration is
// stored, since the kind may come later (a CRD installed after it), but a
// typo is seen at once. The engine keeps a registration whose consumer type
// is not served from being Active until it is.
func (p *plugin) warnUnservedKinds(ctx context.Context, obj *unstructured.Unstructured) {
	if p.kube == nil {
		return
	}
	check := func(path *field.Path, m map[string]any, what string) {
		group, _, _ := unstructured.NestedString(m, "apiGroup")
		kind, _, _ := unstructured.NestedString(m, "kind")
		if kind == "" {
			return
		}
		gk := schema.GroupKind{Group: group, Kind: kind}
		ok, hint, err := kinds.Kind(p.kube.Discovery(), gk)
		if err != nil || ok {
			return
		}
		warning.AddWarning(ctx, "", fmt.Sprintf("%s: %s is not served by this API server (%s); %s", path, kinds.KindString(gk), hint, what))
	}
	if ct, found, _ := unstructured.NestedMap(obj.Object, "spec", "consumerType"); found {
		check(field.NewPath("spec", "consumerType"), ct,
			"the registration is not Active until it is served: correct the kind, or install it")
	}
	claiming, _, _ := unstructured.NestedSlice(obj.Object, "spec", "claimingResources")
	for i, c := range claiming {
		if m, ok := c.(map[string]any); ok {
			check(field.NewPath("spec", "claimingResources").Index(i), m,
				"no object of it can claim this resource type until it is served: correct the kind, or install it")
		}
	}
}

// warnUnregistered adds a warning for each resource type of a grant that no
// registration names, with the nearest registered one: the grant is stored
// (its registration may come later) and is not Active until then.
func (p *plugin) warnUnregistered(ctx context.Context, obj *unstructured.Unstructured) {
	allowances, _, _ := unstructured.NestedSlice(obj.Object, "spec", "allowances")
	if len(allowances) == 0 {
		return
	}
	var registered []string
	listed := false
	for i, a := range allowances {
		m, ok := a.(map[string]any)
		if !ok {
			continue
		}
		rt, _, _ := unstructured.NestedString(m, "resourceType")
		if rt == "" {
			continue
		}
		if !listed {
			list, err := p.Client().Resource(registrations).List(ctx, metav1.ListOptions{})
			if err != nil {
				return // a warning is not worth failing a write for
			}
			for _, r := range list.Items {
				if t, _, _ := unstructured.NestedString(r.Object, "spec", "resourceType"); t != "" {
					registered = append(registered, t)
				}
			}
			listed = true
		}
		if slices.Contains(registered, rt) {
			continue
		}
		msg := fmt.Sprintf("%s: resource type %q is not registered (no ResourceRegistration names it)", field.NewPath("spec", "allowances").Index(i).Child("resourceType"), rt)
		if near := quota.Nearest(rt, registered); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
		warning.AddWarning(ctx, "", msg+"; the grant is not Active until a registration names it")
	}
}
