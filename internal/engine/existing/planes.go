package existing

import (
	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// inPlane names the plane a claim's object is stored in, after its name.
func inPlane(c *quotav1alpha1.ResourceClaim) string {
	if p := c.Annotations[planes.Annotation]; p != "" {
		return " in control plane " + p
	}
	return ""
}
