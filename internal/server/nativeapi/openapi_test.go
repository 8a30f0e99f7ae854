package nativeapi

import (
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
}
