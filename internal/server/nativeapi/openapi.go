package nativeapi

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

var (
	objectMeta = metav1.ObjectMeta{}.OpenAPIModelName()
	listMeta   = metav1.ListMeta{}.OpenAPIModelName()
)

// OpenAPIDefinitions adds the native kinds' definitions to base's: each
// kind's schema is its CRD's (what `kubectl explain` shows, and what
// server-side apply merges by), with metadata the API's ObjectMeta.
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
			defs[name] = common.OpenAPIDefinition{Schema: *s, Dependencies: []string{objectMeta}}

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
