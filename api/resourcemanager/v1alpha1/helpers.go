package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OrganizationOfProject returns the organization a Project belongs to, read
// from its metadata only (its label, else its ownerReference), so that
// metadata-only watches can tell; "" when neither is set yet.
func OrganizationOfProject(m metav1.Object) string {
	if org := m.GetLabels()[OrganizationNameLabel]; org != "" {
		return org
	}
	for _, o := range m.GetOwnerReferences() {
		if o.Kind == "Organization" && o.APIVersion == SchemeGroupVersion.String() {
			return o.Name
		}
	}
	return ""
}
