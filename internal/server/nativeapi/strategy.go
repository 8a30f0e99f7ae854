package nativeapi

import (
	"context"
	"reflect"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// strategy is a native kind's create, update and delete strategy. It
// prepares objects as the CRD server does (status only through its
// subresource, generation counting changes outside metadata) and validates
// with the CRD server's own strategy for the kind, on the object's
// unstructured form: the same rules, the same field paths, the same
// messages.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	k *Kind
}

func newStrategy(k *Kind) *strategy {
	return &strategy{ObjectTyper: Scheme(), NameGenerator: names.SimpleNameGenerator, k: k}
}

var (
	_ rest.RESTCreateStrategy       = &strategy{}
	_ rest.RESTUpdateStrategy       = &strategy{}
	_ rest.RESTDeleteStrategy       = &strategy{}
	_ rest.ResetFieldsStrategy      = &strategy{}
	_ rest.RESTUpdateStrategy       = &statusStrategy{}
	_ rest.ResetFieldsStrategy      = &statusStrategy{}
	_ rest.RESTCreateUpdateStrategy = &strategy{}
)

func (s *strategy) NamespaceScoped() bool { return s.k.Namespaced }

// PrepareForCreate drops status (set only through /status) and starts the
// generation at 1.
func (s *strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if s.k.HasStatus {
		status(obj).SetZero()
	}
	if a, err := meta.Accessor(obj); err == nil {
		a.SetGeneration(1)
	}
}

// PrepareForUpdate keeps the stored status and counts a change outside
// metadata (and status) as a new generation.
func (s *strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if s.k.HasStatus {
		status(obj).Set(status(old))
	}
	if !equality.Semantic.DeepEqual(withoutMetadata(obj), withoutMetadata(old)) {
		n, _ := meta.Accessor(obj)
		o, _ := meta.Accessor(old)
		n.SetGeneration(o.GetGeneration() + 1)
	}
}

func (s *strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	errs := unconverted(obj)
	u, err := s.k.unstructured(obj)
	if err != nil {
		return append(errs, field.InternalError(nil, err))
	}
	return append(errs, s.k.rules.Validate(ctx, u)...)
}

func (s *strategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string {
	u, err := s.k.unstructured(obj)
	if err != nil {
		return nil
	}
	return s.k.rules.WarningsOnCreate(ctx, u)
}

func (s *strategy) Canonicalize(runtime.Object) {}

func (s *strategy) AllowCreateOnUpdate() bool { return false }

func (s *strategy) AllowUnconditionalUpdate() bool { return s.k.rules.AllowUnconditionalUpdate() }

func (s *strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := unconverted(obj)
	u, err := s.k.unstructured(obj)
	if err != nil {
		return append(errs, field.InternalError(nil, err))
	}
	uOld, err := s.k.unstructured(old)
	if err != nil {
		return append(errs, field.InternalError(nil, err))
	}
	return append(errs, s.k.rules.ValidateUpdate(ctx, u, uOld)...)
}

func (s *strategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	u, err := s.k.unstructured(obj)
	if err != nil {
		return nil
	}
	uOld, err := s.k.unstructured(old)
	if err != nil {
		return nil
	}
	return s.k.rules.WarningsOnUpdate(ctx, u, uOld)
}

func (s *strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if r, ok := s.k.rules.(rest.ResetFieldsStrategy); ok {
		return r.GetResetFields()
	}
	return nil
}

// GetAttrs are the labels and the fields a selector may name: the
// metadata's and the CRD's selectable fields, read from the typed object.
func (s *strategy) GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	set := fields.Set{"metadata.name": a.GetName()}
	if s.k.Namespaced {
		set["metadata.namespace"] = a.GetNamespace()
	}
	for _, f := range s.k.fields {
		set[f.name] = f.value(obj)
	}
	return a.GetLabels(), set, nil
}

// statusStrategy is the /status subresource's: everything but the status
// (and the managed fields tracking it) stays as stored.
type statusStrategy struct {
	*strategy
}

func (s *statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	a, _ := meta.Accessor(obj)
	managed := a.GetManagedFields()
	st := reflect.New(status(obj).Type()).Elem()
	st.Set(status(obj))
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(old.DeepCopyObject()).Elem())
	status(obj).Set(st)
	a, _ = meta.Accessor(obj)
	a.SetManagedFields(managed)
}

func (s *statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	u, err := s.k.unstructured(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	uOld, err := s.k.unstructured(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return s.k.statusRules.ValidateUpdate(ctx, u, uOld)
}

func (s *statusStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (s *statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	if r, ok := s.k.statusRules.(rest.ResetFieldsStrategy); ok {
		return r.GetResetFields()
	}
	return nil
}

// status is the Status field of a typed object.
func status(obj runtime.Object) reflect.Value {
	return reflect.ValueOf(obj).Elem().FieldByName("Status")
}

// withoutMetadata is a copy of obj with type and object metadata cleared,
// for comparing everything else.
func withoutMetadata(obj runtime.Object) runtime.Object {
	c := obj.DeepCopyObject()
	v := reflect.ValueOf(c).Elem()
	v.FieldByName("TypeMeta").SetZero()
	v.FieldByName("ObjectMeta").SetZero()
	return c
}

// unstructured is obj as the CRD server would hold it.
func (k *Kind) unstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	dropUnset(k.schema, m)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(k.GVK)
	return u, nil
}

// dropUnset removes from v what a typed object cannot tell from unset and
// the CRD server never sees set: nulls (a nil slice or map the Go type
// writes as null; the CRD server prunes nulls) and empty strings of
// required fields that may not be empty. So an object missing a required
// field reads "Required value", as with the CRD.
func dropUnset(s *structuralschema.Structural, v any) {
	if s == nil {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		required := map[string]bool{}
		if s.ValueValidation != nil {
			for _, r := range s.ValueValidation.Required {
				required[r] = true
			}
		}
		for name, child := range t {
			prop, ok := s.Properties[name]
			if !ok {
				if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
					dropUnset(s.AdditionalProperties.Structural, child)
				}
				continue
			}
			switch {
			case child == nil && !prop.Nullable:
				delete(t, name)
			case child == "" && required[name] && prop.ValueValidation != nil && prop.ValueValidation.MinLength != nil && *prop.ValueValidation.MinLength > 0:
				delete(t, name)
			default:
				dropUnset(&prop, child)
			}
		}
	case []any:
		for _, item := range t {
			dropUnset(s.Items, item)
		}
	}
}
