package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ParseResource reads the resource.version.group form of AnnotationResource
// (group may be empty).
func ParseResource(s string) (schema.GroupVersionResource, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersionResource{}, false
	}
	gvr := schema.GroupVersionResource{Resource: parts[0], Version: parts[1]}
	if len(parts) == 3 {
		gvr.Group = parts[2]
	}
	return gvr, true
}

// FormatResource writes resource.version.group, the form of
// AnnotationResource.
func FormatResource(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}
