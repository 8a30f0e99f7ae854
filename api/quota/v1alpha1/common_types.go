package v1alpha1

// ConsumerTypeRef names a kind of consumer, such as
// resourcemanager.miloapis.com/Organization.
type ConsumerTypeRef struct {
	// apiGroup is the API group of the consumer kind. Empty means the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`

	// kind is the kind of the consumer, for example Organization or Project.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`
}

// ConsumerRef names one consumer of quota: an object whose kind is the
// consumerType of a ResourceRegistration.
type ConsumerRef struct {
	// apiGroup is the API group of the consumer. Empty means the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`

	// kind is the kind of the consumer, for example Organization.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`

	// name is the name of the consumer object. Required everywhere except in
	// a ResourceGrant that selects a group of consumers by
	// spec.consumerSelector, where consumerRef names only their kind.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty" protobuf:"bytes,3,opt,name=name"`

	// namespace is the namespace of the consumer object, for namespaced
	// consumer kinds. Empty for cluster-scoped consumers.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,4,opt,name=namespace"`
}

// Dimension is one key/value pair that narrows a quota bucket or a request,
// for example networking.datumapis.com/location=dfw.
type Dimension struct {
	// key is the dimension name, a qualified name such as
	// networking.datumapis.com/location.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key" protobuf:"bytes,1,opt,name=key"`

	// value is the dimension value, for example dfw.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Value string `json:"value" protobuf:"bytes,2,opt,name=value"`
}

// ResourceType names a quotable resource type: any string of 1-253
// characters, as the reference implementation takes. The convention, which
// admission recommends with a warning, is <service group>/<resource>[/<aspect>],
// for example resourcemanager.miloapis.com/projects.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
type ResourceType string
