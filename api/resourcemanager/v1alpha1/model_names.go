package v1alpha1

// The OpenAPI model names of the kinds, as the CRD server names them
// (reversed group, version, kind): serve publishes the same definitions
// natively (internal/server/nativeapi).

// OpenAPIModelName is the name of Organization's OpenAPI definition.
func (Organization) OpenAPIModelName() string {
	return "com.miloapis.resourcemanager.v1alpha1.Organization"
}

// OpenAPIModelName is the name of OrganizationList's OpenAPI definition.
func (OrganizationList) OpenAPIModelName() string {
	return "com.miloapis.resourcemanager.v1alpha1.OrganizationList"
}

// OpenAPIModelName is the name of Project's OpenAPI definition.
func (Project) OpenAPIModelName() string { return "com.miloapis.resourcemanager.v1alpha1.Project" }

// OpenAPIModelName is the name of ProjectList's OpenAPI definition.
func (ProjectList) OpenAPIModelName() string {
	return "com.miloapis.resourcemanager.v1alpha1.ProjectList"
}
