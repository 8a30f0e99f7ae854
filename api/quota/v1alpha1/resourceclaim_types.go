package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceRequest asks for an amount of one resource type.
type ResourceRequest struct {
	// resourceType is a registered resource type. Each resource type may
	// appear once per claim.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,1,opt,name=resourceType,casttype=ResourceType"`

	// amount is the quantity requested, in the registration's baseUnit.
	// +required
	// +kubebuilder:validation:Minimum=1
	Amount int64 `json:"amount" protobuf:"varint,2,opt,name=amount"`

	// AmountQuantity is amount as written when it was a quantity ("16Gi"),
	// until serve's admission converts it to base units; never stored or
	// served (see UnmarshalJSON).
	AmountQuantity string `json:"-" protobuf:"-"`

	// dimensions are the dimension values of what is requested, for example
	// location=dfw. The request draws from every bucket of its consumer and
	// resource type whose dimensions are all among these values.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []Dimension `json:"dimensions,omitempty" protobuf:"bytes,3,rep,name=dimensions"`
}

// ResourceRef names the object a claim consumes quota for.
type ResourceRef struct {
	// apiGroup is the API group of the object. Empty means the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`

	// kind is the kind of the object, for example Project.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`

	// name is the name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name" protobuf:"bytes,3,opt,name=name"`

	// namespace is the namespace of the object, empty when cluster-scoped.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,4,opt,name=namespace"`
}

// ResourceClaimSpec asks to consume quota. All requests are granted together
// or none is.
// +kubebuilder:validation:XValidation:rule="self.consumerRef == oldSelf.consumerRef",message="consumerRef is immutable; delete the claim and create a new one",fieldPath=".consumerRef"
// +kubebuilder:validation:XValidation:rule="self.requests == oldSelf.requests",message="requests are immutable; delete the claim and create a new one",fieldPath=".requests"
// +kubebuilder:validation:XValidation:rule="has(self.consumerRef.name) && size(self.consumerRef.name) > 0",message="spec.consumerRef.name is required: name the consumer whose quota this is",fieldPath=".consumerRef.name"
type ResourceClaimSpec struct {
	// consumerRef is the consumer charged for the requests.
	// +required
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`

	// requests are the amounts asked for, at most one per resource type.
	// +required
	// +listType=map
	// +listMapKey=resourceType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Requests []ResourceRequest `json:"requests" protobuf:"bytes,2,rep,name=requests"`

	// resourceRef is the object this claim consumes quota for. Its kind must
	// be among the claimingResources of each requested resource type.
	// +optional
	ResourceRef *ResourceRef `json:"resourceRef,omitempty" protobuf:"bytes,3,opt,name=resourceRef"`
}

// AllocationStatus is the outcome of one request of a claim.
// +kubebuilder:validation:Enum=Granted;Denied;Pending
type AllocationStatus string

const (
	// AllocationGranted means the amount is allocated from the consumer's buckets.
	AllocationGranted AllocationStatus = "Granted"
	// AllocationDenied means nothing is allocated for the request.
	AllocationDenied AllocationStatus = "Denied"
	// AllocationPending means no decision has been made yet.
	AllocationPending AllocationStatus = "Pending"
)

// RequestAllocation is the outcome of one request.
type RequestAllocation struct {
	// resourceType is the request's resource type.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,1,opt,name=resourceType,casttype=ResourceType"`

	// status is Granted, Denied or Pending.
	// +required
	Status AllocationStatus `json:"status" protobuf:"bytes,2,opt,name=status,casttype=AllocationStatus"`

	// reason is a CamelCase reason for the status, for example QuotaExceeded.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty" protobuf:"bytes,3,opt,name=reason"`

	// message explains the status in words: what was asked, what is
	// available and what to do.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty" protobuf:"bytes,4,opt,name=message"`

	// allocatedAmount is the amount allocated, 0 unless Granted.
	// +optional
	AllocatedAmount int64 `json:"allocatedAmount,omitempty" protobuf:"varint,5,opt,name=allocatedAmount"`

	// allocatingBucket is the name of the AllowanceBucket without dimensions
	// that the amount is counted in.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AllocatingBucket string `json:"allocatingBucket,omitempty" protobuf:"bytes,6,opt,name=allocatingBucket"`

	// lastTransitionTime is when status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty" protobuf:"bytes,7,opt,name=lastTransitionTime"`
}

// ResourceClaimStatus is the decision on a claim.
type ResourceClaimStatus struct {
	// observedGeneration is the generation last decided.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// conditions: Granted is True when every request is allocated, False with
	// a reason when the claim is denied or pending.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`

	// allocations hold the outcome of each request.
	// +optional
	// +listType=map
	// +listMapKey=resourceType
	// +kubebuilder:validation:MaxItems=20
	Allocations []RequestAllocation `json:"allocations,omitempty" protobuf:"bytes,3,rep,name=allocations"`

	// decisionSeal proves that the quota engine made the Granted decision:
	// a keyed hash of the claim's UID, consumer and requests under a key
	// only the engine holds. A Granted status without a valid seal is not
	// counted when the engine rebuilds its state; the claim is decided
	// again. Written by the engine only.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DecisionSeal string `json:"decisionSeal,omitempty" protobuf:"bytes,4,opt,name=decisionSeal"`
}

// ResourceClaim asks to consume quota on behalf of a consumer. A claim is
// granted all-or-nothing across its requests.
// +kubebuilder:object:root=true
// +genclient
// +kubebuilder:resource:shortName=rclaim;claim,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Granted",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].status`
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.spec.requests[0].resourceType`,priority=1
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Amount",type=integer,JSONPath=`.spec.requests[0].amount`,priority=1
// +kubebuilder:printcolumn:name="Consumer Kind",type=string,JSONPath=`.spec.consumerRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Object Kind",type=string,JSONPath=`.spec.resourceRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Object",type=string,JSONPath=`.spec.resourceRef.name`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.resourceRef.apiGroup`
// +kubebuilder:selectablefield:JSONPath=`.spec.resourceRef.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.resourceRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.resourceRef.namespace`
type ResourceClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is what the claim asks for.
	// +required
	Spec ResourceClaimSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the decision on the claim. A new claim reads Granted=False,
	// reason PendingEvaluation, until it is decided, as in the reference
	// implementation.
	// +optional
	// +kubebuilder:default={conditions: {{type: "Granted", status: "False", reason: "PendingEvaluation", message: "Awaiting capacity evaluation", lastTransitionTime: "1970-01-01T00:00:00Z"}}}
	Status ResourceClaimStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ResourceClaimList is a list of ResourceClaims.
// +kubebuilder:object:root=true
type ResourceClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []ResourceClaim `json:"items" protobuf:"bytes,2,rep,name=items"`
}
