package nativeapi

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	resourcemanagerv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/config/crd"
)

// Kind is one natively served kind, described by its CRD.
type Kind struct {
	GVK        schema.GroupVersionKind
	Resource   string // plural
	Singular   string
	ShortNames []string
	Categories []string
	Namespaced bool
	// HasStatus: the kind has a status subresource.
	HasStatus bool

	goType reflect.Type // the struct, not the pointer
	crd    *apiextensionsv1.CustomResourceDefinition
	// schema is the version's structural schema (the CRD server's).
	schema *structuralschema.Structural
	// openAPI is the version's schema as CRD validation reads it.
	openAPI *apiextensionsinternal.JSONSchemaProps
	// validator is the schema's validator.
	validator apiservervalidation.SchemaValidator
	// zeroForbidden: the schema has a number whose minimum is above zero,
	// which a zero in a body must not pass as unset (decode.go).
	zeroForbidden bool
	// rules validates as the CRD server's strategy does.
	rules       rest.RESTCreateUpdateStrategy
	statusRules rest.RESTUpdateStrategy
	table       rest.TableConvertor
	fields      []selectable
}

// GroupResource is the kind's group and plural.
func (k *Kind) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: k.GVK.Group, Resource: k.Resource}
}

// New returns an empty object of the kind.
func (k *Kind) New() runtime.Object {
	return reflect.New(k.goType).Interface().(runtime.Object)
}

// NewList returns an empty list of the kind.
func (k *Kind) NewList() runtime.Object {
	o, err := Scheme().New(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
	if err != nil {
		panic(err)
	}
	return o
}

// GroupVersions are the API groups served natively.
var GroupVersions = []schema.GroupVersion{quotav1alpha1.SchemeGroupVersion, resourcemanagerv1alpha1.SchemeGroupVersion}

// builtKinds builds the kinds once.
var builtKinds = sync.OnceValues(buildKinds)

// Kinds are every natively served kind, built once from the CRDs serve
// would otherwise install (crd.ForServe: amounts accept quantities).
func Kinds() ([]*Kind, error) { return builtKinds() }

// Names are the CRD names of the natively served kinds: a CRD of one of
// these names, left from a version of serve that installed them, is
// obsolete.
func Names() ([]string, error) {
	ks, err := Kinds()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.crd.Name)
	}
	return out, nil
}

func buildKinds() ([]*Kind, error) {
	crds, err := crd.ForServe()
	if err != nil {
		return nil, err
	}
	s := Scheme()
	out := make([]*Kind, 0, len(crds))
	for _, c := range crds {
		k, err := buildKind(s, c)
		if err != nil {
			return nil, fmt.Errorf("serving %s natively: %w", c.Name, err)
		}
		out = append(out, k)
	}
	return out, nil
}

func buildKind(s *runtime.Scheme, c *apiextensionsv1.CustomResourceDefinition) (*Kind, error) {
	if len(c.Spec.Versions) != 1 {
		return nil, fmt.Errorf("%d versions: native serving knows one", len(c.Spec.Versions))
	}
	v := c.Spec.Versions[0]
	k := &Kind{
		GVK:        schema.GroupVersionKind{Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind},
		Resource:   c.Spec.Names.Plural,
		Singular:   c.Spec.Names.Singular,
		ShortNames: c.Spec.Names.ShortNames,
		Categories: c.Spec.Names.Categories,
		Namespaced: c.Spec.Scope == apiextensionsv1.NamespaceScoped,
		HasStatus:  v.Subresources != nil && v.Subresources.Status != nil,
		crd:        c,
	}
	obj, err := s.New(k.GVK)
	if err != nil {
		return nil, fmt.Errorf("no Go type: %w", err)
	}
	k.goType = reflect.TypeOf(obj).Elem()
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("version %s has no schema", v.Name)
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, err
	}
	k.openAPI = internal
	if k.schema, err = structuralschema.NewStructural(internal); err != nil {
		return nil, fmt.Errorf("structural schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	k.validator = validator
	k.zeroForbidden = minimumAboveZero(k.schema)
	var statusValidator apiservervalidation.SchemaValidator
	var status *apiextensionsinternal.CustomResourceSubresourceStatus
	if k.HasStatus {
		status = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if st, ok := internal.Properties["status"]; ok {
			if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
				return nil, err
			}
		}
	}
	strategy := customresource.NewStrategy(s, k.Namespaced, k.GVK, validator, statusValidator, k.schema, status, nil, v.SelectableFields)
	k.rules = strategy
	if k.HasStatus {
		k.statusRules = customresource.NewStatusStrategy(strategy)
	}
	if k.table, err = tableconvertor.New(v.AdditionalPrinterColumns); err != nil {
		return nil, fmt.Errorf("printer columns: %w", err)
	}
	known := map[string]bool{"metadata.name": true}
	if k.Namespaced {
		known["metadata.namespace"] = true
	}
	for _, f := range v.SelectableFields {
		sf, err := newSelectable(k.goType, f.JSONPath)
		if err != nil {
			return nil, fmt.Errorf("selectable field %s: %w", f.JSONPath, err)
		}
		k.fields = append(k.fields, sf)
		known[sf.name] = true
	}
	// Field selectors name what the CRD declares selectable. The error
	// begins as the CRD server's does, and lists what may be selected.
	supported := slices.Sorted(maps.Keys(known))
	if err := s.AddFieldLabelConversionFunc(k.GVK, func(label, value string) (string, string, error) {
		if known[label] {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s (%s objects can be selected by %s)", label, k.GVK.Kind, strings.Join(supported, ", "))
	}); err != nil {
		return nil, err
	}
	return k, nil
}

// selectable reads one selectable field of a typed object: the field
// indexes along its JSON path, resolved once.
type selectable struct {
	name  string // "spec.consumerRef.kind"
	index [][]int
}

func newSelectable(t reflect.Type, jsonPath string) (selectable, error) {
	name := strings.TrimPrefix(jsonPath, ".")
	sf := selectable{name: name}
	for _, part := range strings.Split(name, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return sf, fmt.Errorf("%s is not an object", part)
		}
		f, ok := fieldByJSONName(t, part)
		if !ok {
			return sf, fmt.Errorf("no field %q in %s", part, t)
		}
		sf.index = append(sf.index, f.Index)
		t = f.Type
	}
	return sf, nil
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if tag == name {
			return f, true
		}
		if tag == "" && f.Anonymous {
			if inner, ok := fieldByJSONName(f.Type, name); ok {
				inner.Index = append(append([]int{}, f.Index...), inner.Index...)
				return inner, true
			}
		}
	}
	return reflect.StructField{}, false
}

// value is the field's value as a field selector compares it: "" when
// unset, as the CRD server does.
func (sf selectable) value(obj runtime.Object) string {
	v := reflect.ValueOf(obj)
	for _, idx := range sf.index {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return ""
			}
			v = v.Elem()
		}
		v = v.FieldByIndex(idx)
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	return fmt.Sprint(v.Interface())
}

// minimumAboveZero reports whether s, or anything in it, is a number whose
// minimum is above zero.
func minimumAboveZero(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if (s.Type == "integer" || s.Type == "number") && s.ValueValidation != nil && s.ValueValidation.Minimum != nil && *s.ValueValidation.Minimum > 0 {
		return true
	}
	for _, p := range s.Properties {
		if minimumAboveZero(&p) {
			return true
		}
	}
	if minimumAboveZero(s.Items) {
		return true
	}
	if s.AdditionalProperties != nil {
		return minimumAboveZero(s.AdditionalProperties.Structural)
	}
	return false
}
