package registration

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
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
}

var (
	_                admission.ValidationInterface     = &plugin{}
	_                initializer.WantsDynamicClient    = &plugin{}
	_                admission.InitializationValidator = &plugin{}
	registrations                                      = quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations")
	registrationKind                                   = quotav1alpha1.Resource("resourceregistrations").WithVersion("").GroupResource()
)

// Validate refuses a second registration of a resource type.
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != registrationKind || a.GetSubresource() != "" {
		return nil
	}
	obj, ok := a.GetObject().(*unstructured.Unstructured)
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
	rt, _, _ := unstructured.NestedString(obj.Object, "spec", "resourceType")
	if rt == "" {
		return nil // the schema reports the missing field
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
