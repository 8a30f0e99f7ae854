package nativeapi

import (
	"slices"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

func TestOpenAPIDefinitions(t *testing.T) {
	defs := OpenAPIDefinitions(generatedopenapi.GetOpenAPIDefinitions)(func(p string) spec.Ref { return spec.MustCreateRef(p) })
	for _, want := range []string{objectMeta, "com.miloapis.quota.v1alpha1.ResourceClaim", "com.miloapis.resourcemanager.v1alpha1.ProjectList"} {
		if _, ok := defs[want]; !ok {
			t.Errorf("no definition of %s", want)
		}
	}
	// Int-or-strings refer to the API's definitions, which kubectl explain
	// names (test/integration/nativeapi has the served document).
	for _, tc := range []struct {
		model string
		path  []string
		want  string
	}{
		{"com.miloapis.quota.v1alpha1.ResourceGrant", []string{"spec", "allowances", "[]", "buckets", "[]", "amount"}, intOrString},
		{"com.miloapis.quota.v1alpha1.ClaimCreationPolicy", []string{"spec", "target", "resourceClaimTemplate", "spec", "requests", "[]", "amount"}, intOrString},
		{"com.miloapis.quota.v1alpha1.ResourceRegistration", []string{"spec", "baseUnitQuantity"}, quantity},
	} {
		def := defs[tc.model]
		s := &def.Schema
		for _, p := range tc.path {
			if p == "[]" {
				s = s.Items.Schema
			} else {
				next := s.Properties[p]
				s = &next
			}
		}
		if got := s.Ref.String(); got != tc.want || s.Description == "" || isIntOrString(s) {
			t.Errorf("%s %v: ref %q, description %q, extensions %v; want a reference to %s with the description", tc.model, tc.path, got, s.Description, s.Extensions, tc.want)
		}
		if !slices.Contains(def.Dependencies, tc.want) {
			t.Errorf("%s depends on %v; want %s too", tc.model, def.Dependencies, tc.want)
		}
	}
}
