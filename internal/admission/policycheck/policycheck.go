package policycheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaPolicyValidation"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update)}, nil
	})
}

type plugin struct {
	*admission.Handler
	kube    kubernetes.Interface
	once    sync.Once
	schemas *triggerschema.Resolver
}

var (
	_           admission.ValidationInterface          = &plugin{}
	_           initializer.WantsExternalKubeClientSet = &plugin{}
	claimPolicy                                        = quotav1alpha1.Resource("claimcreationpolicies")
	grantPolicy                                        = quotav1alpha1.Resource("grantcreationpolicies")
)

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (p *plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.kube = c }

// ValidateInitialization implements admission.InitializationValidator.
func (p *plugin) ValidateInitialization() error { return nil }

// Validate refuses a policy whose spec can never work, and warns of what
// type checking against the trigger kind's schema finds (warnings.go).
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr := a.GetResource().GroupResource()
	if a.GetSubresource() != "" || (gr != claimPolicy && gr != grantPolicy) {
		return nil
	}
	obj, ok := plugininit.Unstructured(a.GetObject())
	if !ok {
		return nil
	}
	var err error
	switch gr {
	case claimPolicy:
		err = check(a, obj, &quotav1alpha1.ClaimCreationPolicy{}, func(o *quotav1alpha1.ClaimCreationPolicy) error {
			if _, err := policy.Compile(o, policy.Options{}); err != nil {
				return err
			}
			p.warn(ctx, o.Spec.Trigger.Resource, func(opts policy.Options) ([]policy.Warning, error) {
				c, err := policy.Compile(o, opts)
				if err != nil {
					return nil, err
				}
				return c.Warnings, nil
			})
			return nil
		}, func(o *quotav1alpha1.ClaimCreationPolicy) any { return o.Spec })
	case grantPolicy:
		err = check(a, obj, &quotav1alpha1.GrantCreationPolicy{}, func(o *quotav1alpha1.GrantCreationPolicy) error {
			if _, err := policy.CompileGrant(o, policy.Options{}); err != nil {
				return err
			}
			p.warn(ctx, o.Spec.Trigger.Resource, func(opts policy.Options) ([]policy.Warning, error) {
				c, err := policy.CompileGrant(o, opts)
				if err != nil {
					return nil, err
				}
				return c.Warnings, nil
			})
			return nil
		}, func(o *quotav1alpha1.GrantCreationPolicy) any { return o.Spec })
	}
	return err
}

// check compiles the policy when its spec is new (a create, or an update
// that changes the spec: an update of its metadata alone, such as removing
// a finalizer, is never refused) and refuses it on the field at fault.
func check[T runtime.Object](a admission.Attributes, obj *unstructured.Unstructured, into T, compile func(T) error, spec func(T) any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		return nil // the schema reports what does not decode
	}
	if a.GetOperation() == admission.Update {
		if old, ok := plugininit.Unstructured(a.GetOldObject()); ok {
			prev := into.DeepCopyObject().(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(old.Object, prev); err == nil && equality.Semantic.DeepEqual(spec(prev), spec(into)) {
				return nil
			}
		}
	}
	err := compile(into)
	if err == nil {
		return nil
	}
	var pe *policy.Error
	if !errors.As(err, &pe) {
		return apierrors.NewInternalError(fmt.Errorf("validating %s %s: %w", a.GetKind().Kind, a.GetName(), err))
	}
	path, _ := parsePath(pe.Field)
	var bad any = field.OmitValueType{}
	if v := valueAt(obj, pe.Field); v != nil {
		bad = v
	}
	return apierrors.NewInvalid(a.GetKind().GroupKind(), a.GetName(), field.ErrorList{
		{Type: field.ErrorTypeInvalid, Field: path.String(), BadValue: bad,
			Detail: fmt.Sprintf("%v (%s); the policy was not stored: fix the field and apply it again", pe.Err, pe.Cause)},
	})
}
