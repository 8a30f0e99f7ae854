package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OrganizationType is the kind of tenant an organization is.
// +kubebuilder:validation:Enum=Personal;Standard
type OrganizationType string

const (
	// OrganizationTypePersonal is an organization of one user.
	OrganizationTypePersonal OrganizationType = "Personal"
	// OrganizationTypeStandard is an organization of a team or a company.
	OrganizationTypeStandard OrganizationType = "Standard"
)

// OrganizationSpec is what an organization is.
type OrganizationSpec struct {
	// type is Personal or Standard. Grant and claim policies may read it to
	// give each type its own quota. It is immutable, as in the reference
	// implementation: create a new organization to change it.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.type is immutable; create a new Organization of the other type instead"
	Type OrganizationType `json:"type" protobuf:"bytes,1,opt,name=type,casttype=OrganizationType"`
}

// OrganizationStatus is the observed state of an organization.
type OrganizationStatus struct {
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// namespace is the organization's namespace, once it exists.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,2,opt,name=namespace"`

	// conditions: Ready says whether the organization's namespace and owner
	// binding exist.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,3,rep,name=conditions"`
}

// Organization is a tenant. It gets a namespace organization-<name>, owned by
// it, where its grants, claims and buckets live, and its creator is bound
// there as its owner. Its name is a DNS label of at most 50 characters, so
// that its namespace's name is one too.
// +kubebuilder:object:root=true
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=org,categories=tenancy
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 50",message="metadata.name must be at most 50 characters, so that the organization's namespace organization-<name> is at most 63; choose a shorter name"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit), so that it can name the organization's namespace"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.status.namespace`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Organization struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is what the organization is.
	// +required
	Spec OrganizationSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the organization.
	// +optional
	Status OrganizationStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// OrganizationList is a list of Organizations.
// +kubebuilder:object:root=true
type OrganizationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []Organization `json:"items" protobuf:"bytes,2,rep,name=items"`
}
