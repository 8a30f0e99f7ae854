package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GrantBucket is an amount of quota, optionally narrowed by dimensions.
type GrantBucket struct {
	// amount is the quota granted, in the registration's baseUnit.
	// +required
	// +kubebuilder:validation:Minimum=0
	Amount int64 `json:"amount" protobuf:"varint,1,opt,name=amount"`

	// AmountQuantity is amount as written when it was a quantity ("16Gi"),
	// until serve's admission converts it to base units; never stored or
	// served (see UnmarshalJSON).
	AmountQuantity string `json:"-" protobuf:"-"`

	// dimensions narrow this bucket: it limits only requests whose dimension
	// values include every pair listed. A bucket without dimensions is the
	// overall limit for the resource type.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []Dimension `json:"dimensions,omitempty" protobuf:"bytes,2,rep,name=dimensions"`
}

// Allowance is the quota granted for one resource type.
type Allowance struct {
	// resourceType is a registered resource type, for example
	// resourcemanager.miloapis.com/projects.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,1,opt,name=resourceType,casttype=ResourceType"`

	// buckets are the amounts granted, each for one dimension set.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Buckets []GrantBucket `json:"buckets" protobuf:"bytes,2,rep,name=buckets"`
}

// ResourceGrantSpec gives quota to one consumer, or to a group of consumers
// selected by their labels.
// +kubebuilder:validation:XValidation:rule="has(self.consumerSelector) != (has(self.consumerRef.name) && size(self.consumerRef.name) > 0)",message="name one consumer in spec.consumerRef.name, or select a group of consumers of kind spec.consumerRef.kind with spec.consumerSelector, not both",fieldPath=".consumerRef.name"
// +kubebuilder:validation:XValidation:rule="!has(self.validFrom) || !has(self.expiresAt) || self.validFrom < self.expiresAt",message="spec.expiresAt must be later than spec.validFrom: a grant's window ends after it starts; move expiresAt later or validFrom earlier",fieldPath=".expiresAt"
type ResourceGrantSpec struct {
	// consumerRef is the consumer that receives the quota. Its kind and
	// apiGroup must be the consumerType of each allowance's registration, or
	// one of its parentConsumerTypes. With consumerSelector it names only the
	// kind of the consumers selected (name is omitted).
	// +required
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`

	// consumerSelector makes the grant a group's: its buckets cap the sum of
	// the usage of every consumer of kind consumerRef.kind whose labels it
	// matches, on top of each consumer's own limits (a claim must fit every
	// group that covers it). Groups select only on labels under the reserved
	// prefix (quota.miloapis.com/ by default), which only the platform may
	// set, so that a tenant cannot leave a cap by relabelling its project.
	// Only the platform writes group grants, in a platform namespace.
	// +optional
	ConsumerSelector *metav1.LabelSelector `json:"consumerSelector,omitempty" protobuf:"bytes,2,opt,name=consumerSelector"`

	// allowances are the quotas granted, one per resource type.
	// +required
	// +listType=map
	// +listMapKey=resourceType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Allowances []Allowance `json:"allowances" protobuf:"bytes,3,rep,name=allowances"`

	// validFrom, when set, is when the grant starts to count towards its
	// buckets; before it the grant limits nothing (Active=False, reason
	// NotYetValid). The engine's leader records the start on the grant
	// (status.window) before it decides any claim against the raised limit.
	// +optional
	ValidFrom *metav1.Time `json:"validFrom,omitempty" protobuf:"bytes,4,opt,name=validFrom"`

	// expiresAt, when set, is when the grant stops counting (Active=False,
	// reason Expired). Nothing held is revoked: a bucket whose allocation then
	// exceeds its limit is OverLimit and refuses new claims until usage falls
	// under it. The expiry is recorded on the grant before any claim is
	// decided against the lowered limit.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty" protobuf:"bytes,5,opt,name=expiresAt"`
}

// GrantWindowPhase is where a grant with a time window stands in it.
// +kubebuilder:validation:Enum=Scheduled;Active;Expired
type GrantWindowPhase string

const (
	// GrantWindowScheduled: before validFrom; the grant does not count.
	GrantWindowScheduled GrantWindowPhase = "Scheduled"
	// GrantWindowActive: inside the window; the grant counts.
	GrantWindowActive GrantWindowPhase = "Active"
	// GrantWindowExpired: past expiresAt; the grant no longer counts.
	GrantWindowExpired GrantWindowPhase = "Expired"
)

// GrantWindowStatus is the engine's durable record of a windowed grant's
// phase. A phase only moves forward (Scheduled, Active, Expired) for one
// window; a later leader honours it whatever its own clock says. Editing
// the window starts a new record.
type GrantWindowStatus struct {
	// phase is the grant's phase, as recorded by the engine's leader.
	// +required
	Phase GrantWindowPhase `json:"phase" protobuf:"bytes,1,opt,name=phase,casttype=GrantWindowPhase"`

	// validFrom and expiresAt are the window the phase was recorded for
	// (the spec's when it was recorded).
	// +optional
	ValidFrom *metav1.Time `json:"validFrom,omitempty" protobuf:"bytes,2,opt,name=validFrom"`
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty" protobuf:"bytes,3,opt,name=expiresAt"`

	// since is when the leader recorded the phase, by its clock.
	// +optional
	Since metav1.Time `json:"since,omitempty" protobuf:"bytes,4,opt,name=since"`
}

// ResourceGrantStatus is the observed state of a grant.
type ResourceGrantStatus struct {
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// conditions: Active says whether the grant counts towards limits.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`

	// window is the engine's record of the grant's phase in its time window
	// (spec.validFrom, spec.expiresAt); absent for a grant without one.
	// +optional
	Window *GrantWindowStatus `json:"window,omitempty" protobuf:"bytes,3,opt,name=window"`

	// consumerState says whether the Organization, Project or Namespace the
	// grant names exists: Found, or Missing (the grant limits nothing until
	// it is created; a Warning Event, reason ConsumerNotFound, says so with
	// the nearest existing name). Absent on grants that select consumers by
	// label, or name a consumer of another kind. The conditions stay the
	// reference implementation's: Active, "ResourceGrant is active".
	// +optional
	ConsumerState GrantConsumerState `json:"consumerState,omitempty" protobuf:"bytes,4,opt,name=consumerState,casttype=GrantConsumerState"`
}

// GrantConsumerState says whether a grant's consumer exists.
// +kubebuilder:validation:Enum=Found;Missing
type GrantConsumerState string

const (
	// GrantConsumerFound: the consumer the grant names exists.
	GrantConsumerFound GrantConsumerState = "Found"
	// GrantConsumerMissing: it does not; the grant limits nothing until it
	// is created.
	GrantConsumerMissing GrantConsumerState = "Missing"
)

// ResourceGrant gives quota to a consumer. Grants for one consumer and
// resource type add up.
// +kubebuilder:object:root=true
// +genclient
// +kubebuilder:resource:shortName=rgrant;grant,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Consumer State",type=string,JSONPath=`.status.consumerState`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Consumer Group",type=string,JSONPath=`.spec.consumerRef.apiGroup`,priority=1
// +kubebuilder:printcolumn:name="Consumer Type",type=string,JSONPath=`.spec.consumerRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`,priority=1
// +kubebuilder:printcolumn:name="First Resource",type=string,JSONPath=`.spec.allowances[0].resourceType`,priority=1
// +kubebuilder:printcolumn:name="First Amount",type=integer,JSONPath=`.spec.allowances[0].buckets[0].amount`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.name`
type ResourceGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the quota granted.
	// +required
	Spec ResourceGrantSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the grant.
	// +optional
	Status ResourceGrantStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ResourceGrantList is a list of ResourceGrants.
// +kubebuilder:object:root=true
type ResourceGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []ResourceGrant `json:"items" protobuf:"bytes,2,rep,name=items"`
}
