package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegistrationType says how a registered resource is consumed.
// +kubebuilder:validation:Enum=Entity;Allocation
type RegistrationType string

const (
	// RegistrationTypeEntity counts objects: one claim request per object,
	// for example projects per organization.
	RegistrationTypeEntity RegistrationType = "Entity"
	// RegistrationTypeAllocation measures an amount, for example CPU
	// millicores or bytes of memory.
	RegistrationTypeAllocation RegistrationType = "Allocation"
)

// ClaimingResource names a kind whose objects may claim a registered resource.
type ClaimingResource struct {
	// apiGroup is the API group of the claiming kind. Empty means the core group.
	// +optional
	// +kubebuilder:default=""
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup" protobuf:"bytes,1,opt,name=apiGroup"`

	// kind is the claiming kind, for example Project.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`
}

// ResourceRegistrationSpec defines a quotable resource type.
// +kubebuilder:validation:XValidation:rule="self.resourceType == oldSelf.resourceType",message="spec.resourceType is immutable; create a new ResourceRegistration instead",fieldPath=".resourceType"
// +kubebuilder:validation:XValidation:rule="self.consumerType == oldSelf.consumerType",message="spec.consumerType is immutable; create a new ResourceRegistration instead",fieldPath=".consumerType"
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type",message="spec.type is immutable; create a new ResourceRegistration instead",fieldPath=".type"
type ResourceRegistrationSpec struct {
	// consumerType is the kind of object that receives grants and is charged
	// by claims of this resource type, for example an Organization.
	// +required
	ConsumerType ConsumerTypeRef `json:"consumerType" protobuf:"bytes,1,opt,name=consumerType"`
	// parentConsumerTypes are the consumer kinds above consumerType, nearest
	// first, that this resource type is also charged to: a claim of a
	// Project then draws, in the same all-or-nothing decision, from its own
	// buckets and from its Organization's, and grants may name either kind.
	// A level where no grant exists does not limit. Where each consumer's
	// parent is found is declared per consumer kind (quotaplane serve
	// --consumer-parent; Project → Organization by default).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	ParentConsumerTypes []ConsumerTypeRef `json:"parentConsumerTypes,omitempty" protobuf:"bytes,2,rep,name=parentConsumerTypes"`

	// type says how the resource is consumed: Entity (counted objects) or
	// Allocation (a measured amount).
	// +required
	Type RegistrationType `json:"type" protobuf:"bytes,3,opt,name=type,casttype=RegistrationType"`

	// resourceType is the unique name of the quotable resource, for example
	// resourcemanager.miloapis.com/projects. Only one registration may name
	// a given resourceType.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,4,opt,name=resourceType,casttype=ResourceType"`

	// description says what the resource is, for people reading quotas.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty" protobuf:"bytes,5,opt,name=description"`

	// baseUnit is the unit that grant and claim amounts are expressed in,
	// for example project, millicore or byte.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	BaseUnit string `json:"baseUnit" protobuf:"bytes,6,opt,name=baseUnit"`

	// displayUnit is the unit people read amounts in, for example core or GiB.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	DisplayUnit string `json:"displayUnit,omitempty" protobuf:"bytes,7,opt,name=displayUnit"`

	// unitConversionFactor is the number of base units in one display unit,
	// for example 1000 millicores per core. Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	UnitConversionFactor int64 `json:"unitConversionFactor,omitempty" protobuf:"varint,8,opt,name=unitConversionFactor"`

	// baseUnitQuantity is what one base unit is as a Kubernetes quantity,
	// for example "1Mi" for a base unit of MiB, or "1" for cores. With it,
	// ClaimCreationPolicies may write amounts of this resource type as
	// quantities ("2Gi", "500m"), converted to base units exactly: an amount
	// that is not a whole number of base units is refused, never rounded.
	// Without it, amounts are whole numbers of base units.
	// +optional
	BaseUnitQuantity *resource.Quantity `json:"baseUnitQuantity,omitempty" protobuf:"bytes,9,opt,name=baseUnitQuantity"`

	// claimingResources lists the kinds whose objects may claim this
	// resource. Each kind may appear once (admission refuses a duplicate,
	// naming its first occurrence). Empty: no object claims it; claims are
	// written by hand.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	ClaimingResources []ClaimingResource `json:"claimingResources,omitempty" protobuf:"bytes,10,rep,name=claimingResources"`

	// thresholds are the fractions of a limit, in percent, at which the
	// buckets of this resource type report that they are filling up: their
	// condition ApproachingLimit and an Event when a bucket crosses one, up
	// or back down. The shipped alert rules and dashboard read the same
	// values (milo_quota_registration_threshold_percent). Defaults to 80 and
	// 95.
	// +optional
	Thresholds *UtilizationThresholds `json:"thresholds,omitempty" protobuf:"bytes,11,opt,name=thresholds"`
}

// UtilizationThresholds are percentages of a bucket's limit. A bucket that
// crossed one upwards falls back below it only once its allocation is 5
// points under it, so a bucket at the line does not flap.
// +kubebuilder:validation:XValidation:rule="(has(self.warning) ? self.warning : 80) < (has(self.critical) ? self.critical : 95)",message="warning must be below critical (defaults 80 and 95)"
type UtilizationThresholds struct {
	// warning is the percent of the limit at which a bucket reports
	// WarningThresholdReached. Defaults to 80.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Warning int32 `json:"warning,omitempty" protobuf:"varint,1,opt,name=warning"`

	// critical is the percent of the limit at which a bucket reports
	// CriticalThresholdReached. Defaults to 95.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Critical int32 `json:"critical,omitempty" protobuf:"varint,2,opt,name=critical"`
}

// ResourceRegistrationStatus is the observed state of a registration.
type ResourceRegistrationStatus struct {
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// conditions: Active says whether grants and claims may use this
	// resource type.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`
}

// ResourceRegistration registers a quotable resource type: its unit, the kind
// of consumer it is granted to, and the kinds that may claim it.
// +kubebuilder:object:root=true
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=rreg;registration,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Resource Type",type=string,JSONPath=`.spec.resourceType`,priority=1
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerType.kind`,priority=1
// +kubebuilder:printcolumn:name="Base Unit",type=string,JSONPath=`.spec.baseUnit`,priority=1
// +kubebuilder:printcolumn:name="Display Unit",type=string,JSONPath=`.spec.displayUnit`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerType.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerType.apiGroup`
// +kubebuilder:selectablefield:JSONPath=`.spec.resourceType`
type ResourceRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec defines the registered resource type.
	// +required
	Spec ResourceRegistrationSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the registration.
	// +optional
	Status ResourceRegistrationStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ResourceRegistrationList is a list of ResourceRegistrations.
// +kubebuilder:object:root=true
type ResourceRegistrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []ResourceRegistration `json:"items" protobuf:"bytes,2,rep,name=items"`
}
