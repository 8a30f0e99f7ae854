package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProjectOwnerKind is the kind of object that can own a project.
// +kubebuilder:validation:Enum=Organization
type ProjectOwnerKind string

// ProjectOwnerKindOrganization: the project belongs to an Organization.
const ProjectOwnerKindOrganization ProjectOwnerKind = "Organization"

// OwnerReference names the owner of a project.
type OwnerReference struct {
	// kind is the owner's kind: Organization.
	// +required
	Kind ProjectOwnerKind `json:"kind" protobuf:"bytes,1,opt,name=kind,casttype=ProjectOwnerKind"`

	// name is the owner's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=50
	Name string `json:"name" protobuf:"bytes,2,opt,name=name"`
}

// ProjectSpec is what a project is.
type ProjectSpec struct {
	// ownerRef is the organization the project belongs to and whose quota it
	// charges. It is immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.ownerRef is immutable: a project cannot move to another organization; create a new project there instead"
	OwnerRef OwnerReference `json:"ownerRef" protobuf:"bytes,1,opt,name=ownerRef"`
}

// ProjectStatus is the observed state of a project.
type ProjectStatus struct {
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// conditions: Ready says whether the project's organization exists and is
	// not being deleted.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`
}

// Project belongs to one Organization and charges its quota. It is labelled
// with its organization's name and owned by it: deleting the organization
// deletes its projects.
// +kubebuilder:object:root=true
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=proj,categories=tenancy
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 55",message="metadata.name must be at most 55 characters (as in the reference implementation); choose a shorter name"
// +kubebuilder:printcolumn:name="Organization",type=string,JSONPath=`.spec.ownerRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Project struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is what the project is.
	// +required
	Spec ProjectSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the project.
	// +optional
	Status ProjectStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ProjectList is a list of Projects.
// +kubebuilder:object:root=true
type ProjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []Project `json:"items" protobuf:"bytes,2,rep,name=items"`
}
