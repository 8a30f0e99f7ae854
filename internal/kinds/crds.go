package kinds

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CRDName is the name of the CustomResourceDefinition that defines gr,
// <plural>.<group>, as the API server requires it.
func CRDName(gr schema.GroupResource) string {
	return gr.Resource + "." + gr.Group
}

// CRDGroup is the group a CustomResourceDefinition of that name defines;
// false when the name is not <plural>.<group>.
func CRDGroup(name string) (string, bool) {
	_, group, ok := strings.Cut(name, ".")
	return group, ok && group != ""
}

// ScaleReplicasPath is the field path where objects of a resource keep the
// replica count its scale subresource sets: the specReplicasPath that crd,
// the resource's CustomResourceDefinition, gives the scale of version, or
// spec.replicas, where the built-in kinds and aggregated APIs keep it, when
// crd is nil or names none.
func ScaleReplicasPath(crd *unstructured.Unstructured, version string) []string {
	path := []string{"spec", "replicas"}
	if crd == nil {
		return path
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if name, _, _ := unstructured.NestedString(vm, "name"); name != version {
			continue
		}
		if sp, found, _ := unstructured.NestedString(vm, "subresources", "scale", "specReplicasPath"); found {
			path = strings.Split(strings.TrimPrefix(sp, "."), ".")
		}
	}
	return path
}
