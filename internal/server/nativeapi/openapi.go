package nativeapi

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

var (
	objectMeta  = metav1.ObjectMeta{}.OpenAPIModelName()
	listMeta    = metav1.ListMeta{}.OpenAPIModelName()
	intOrString = intstr.IntOrString{}.OpenAPIModelName()
	quantity    = resource.Quantity{}.OpenAPIModelName()
)

// OpenAPIDefinitions adds the native kinds' definitions to base's: each
// kind's schema is its CRD's (what `kubectl explain` shows, and what
// server-side apply merges by), with metadata the API's ObjectMeta and each
// int-or-string the API's IntOrString or Quantity (namedScalars).
func OpenAPIDefinitions(base common.GetOpenAPIDefinitions) common.GetOpenAPIDefinitions {
	return func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		defs := base(ref)
		ks, err := Kinds()
		if err != nil {
			return defs // the server fails to start on the same error when it installs the groups
		}
		if rk, err := reviewKind(); err == nil {
			ks = append(ks[:len(ks):len(ks)], rk)
		}
		for _, k := range ks {
			name := modelName(k.New())
			s := k.schema.ToKubeOpenAPI()
			if s.Properties == nil {
				s.Properties = map[string]spec.Schema{}
			}
			s.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{
				Description: "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
				Default:     map[string]any{},
				Ref:         ref(objectMeta),
			}}
			deps := map[string]bool{objectMeta: true}
			namedScalars(s, k.goType, ref, deps)
			defs[name] = common.OpenAPIDefinition{Schema: *s, Dependencies: slices.Sorted(maps.Keys(deps))}

			if k.answered() {
				continue // never listed
			}
			list := modelName(k.NewList())
			defs[list] = common.OpenAPIDefinition{
				Schema: spec.Schema{SchemaProps: spec.SchemaProps{
					Description: k.GVK.Kind + "List is a list of " + k.GVK.Kind + " objects.",
					Type:        []string{"object"},
					Required:    []string{"items"},
					Properties: map[string]spec.Schema{
						"apiVersion": {SchemaProps: spec.SchemaProps{Type: []string{"string"},
							Description: "APIVersion defines the versioned schema of this representation of an object."}},
						"kind": {SchemaProps: spec.SchemaProps{Type: []string{"string"},
							Description: "Kind is a string value representing the REST resource this object represents."}},
						"metadata": {SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(listMeta)}},
						"items": {SchemaProps: spec.SchemaProps{Type: []string{"array"},
							Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(name)}}}}},
					},
				}},
				Dependencies: []string{listMeta, name},
			}
		}
		return defs
	}
}

// modelName is the name of obj's OpenAPI definition (the API types name
// theirs as the CRD server does).
func modelName(obj any) string {
	if n, ok := obj.(interface{ OpenAPIModelName() string }); ok {
		return n.OpenAPIModelName()
	}
	t := reflect.TypeOf(obj).Elem()
	return t.PkgPath() + "." + t.Name()
}

// namedScalars puts back, in a kind's schema s of Go type t, the named
// types a CRD schema cannot refer to: each int-or-string property becomes a
// reference to the API's IntOrString definition (Quantity for a
// resource.Quantity field), as in the built-in kinds' definitions. kubectl
// explain names a field's type from its reference (<IntOrString>,
// <Quantity>); the CRD's inline int-or-string, which has no type, it shows
// as <Object>. deps gains the definitions referred to.
func namedScalars(s *spec.Schema, t reflect.Type, ref common.ReferenceCallback, deps map[string]bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for name, p := range s.Properties {
		var ft reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := fieldByJSONName(t, name); ok {
				ft = f.Type
			}
		}
		if isIntOrString(&p) {
			s.Properties[name] = named(&p, ft, ref, deps)
			continue
		}
		namedScalars(&p, ft, ref, deps)
		s.Properties[name] = p
	}
	elem := func() reflect.Type {
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
			return t.Elem()
		}
		return nil
	}
	if s.Items != nil && s.Items.Schema != nil {
		if isIntOrString(s.Items.Schema) {
			*s.Items.Schema = named(s.Items.Schema, elem(), ref, deps)
		} else {
			namedScalars(s.Items.Schema, elem(), ref, deps)
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if isIntOrString(s.AdditionalProperties.Schema) {
			*s.AdditionalProperties.Schema = named(s.AdditionalProperties.Schema, elem(), ref, deps)
		} else {
			namedScalars(s.AdditionalProperties.Schema, elem(), ref, deps)
		}
	}
}

const xIntOrString = "x-kubernetes-int-or-string"

func isIntOrString(s *spec.Schema) bool {
	v, _ := s.Extensions.GetBool(xIntOrString)
	return v
}

// named is the int-or-string property p of Go type t (nil when unknown) as
// a reference, keeping its description and other extensions.
func named(p *spec.Schema, t reflect.Type, ref common.ReferenceCallback, deps map[string]bool) spec.Schema {
	model := intOrString
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[resource.Quantity]() {
		model = quantity
	}
	deps[model] = true
	out := spec.Schema{SchemaProps: spec.SchemaProps{Description: p.Description, Ref: ref(model)}}
	for k, v := range p.Extensions {
		if !strings.EqualFold(k, xIntOrString) {
			out.AddExtension(k, v)
		}
	}
	return out
}
