package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AllowanceBucketSpec identifies the consumer, resource type and dimension
// set a bucket accounts for. Buckets are created and kept by quotaplane.
// +kubebuilder:validation:XValidation:rule="has(self.consumerRef.name) && size(self.consumerRef.name) > 0",message="spec.consumerRef.name is required: name the consumer whose quota this is",fieldPath=".consumerRef.name"
type AllowanceBucketSpec struct {
	// consumerRef is the consumer this bucket accounts for.
	// +required
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`

	// resourceType is the resource type this bucket accounts for.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,2,opt,name=resourceType,casttype=ResourceType"`

	// dimensions narrow the bucket; empty means the overall limit.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []Dimension `json:"dimensions,omitempty" protobuf:"bytes,3,rep,name=dimensions"`
}

// ContributingGrantRef names a grant that adds to a bucket's limit.
type ContributingGrantRef struct {
	// name is the grant's name.
	// +required
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// namespace is the grant's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,2,opt,name=namespace"`

	// amount is what this grant adds to the limit.
	// +required
	Amount int64 `json:"amount" protobuf:"varint,3,opt,name=amount"`

	// lastObservedGeneration is the grant's generation these numbers were
	// taken from.
	// +optional
	LastObservedGeneration int64 `json:"lastObservedGeneration" protobuf:"varint,4,opt,name=lastObservedGeneration"`

	// expiresAt is when this grant stops counting (its spec.expiresAt);
	// absent for a grant without an expiry.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty" protobuf:"bytes,5,opt,name=expiresAt"`
}

// ClusterUsage is what objects in one member cluster hold of a bucket.
type ClusterUsage struct {
	// name is the member cluster's name.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// allocated is the sum of the granted requests of its objects.
	Allocated int64 `json:"allocated" protobuf:"varint,2,opt,name=allocated"`
}

// AllowanceBucketStatus holds the live numbers of a bucket.
type AllowanceBucketStatus struct {
	// observedGeneration is the generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// limit is the sum of the matching buckets of all active grants.
	// +optional
	Limit int64 `json:"limit" protobuf:"varint,2,opt,name=limit"`

	// allocated is the sum of the granted requests counted in this bucket.
	// +optional
	Allocated int64 `json:"allocated" protobuf:"varint,3,opt,name=allocated"`

	// available is limit minus allocated, never below 0.
	// +optional
	Available int64 `json:"available" protobuf:"varint,4,opt,name=available"`

	// baseUnit is the unit limit, allocated and available are counted in:
	// the registration's baseUnit.
	// +optional
	BaseUnit string `json:"baseUnit,omitempty" protobuf:"bytes,5,opt,name=baseUnit"`

	// claimCount is the number of granted claims counted in this bucket.
	// +optional
	ClaimCount int32 `json:"claimCount" protobuf:"varint,6,opt,name=claimCount"`

	// grantCount is the number of active grants contributing to the limit.
	// +optional
	GrantCount int32 `json:"grantCount" protobuf:"varint,7,opt,name=grantCount"`

	// clusters is the part of allocated held by objects in each member
	// cluster (quotaplane webhook); allocated is the total across them and
	// the quota plane itself. Absent when no member cluster holds any.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Clusters []ClusterUsage `json:"clusters,omitempty" protobuf:"bytes,8,rep,name=clusters"`

	// contributingGrantRefs are the grants adding to the limit.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	ContributingGrantRefs []ContributingGrantRef `json:"contributingGrantRefs,omitempty" protobuf:"bytes,9,rep,name=contributingGrantRefs"`

	// lastReconciliation is when these numbers were last written.
	// +optional
	LastReconciliation *metav1.Time `json:"lastReconciliation,omitempty" protobuf:"bytes,10,opt,name=lastReconciliation"`
	// usageTrend is how allocated has moved over the decision history's
	// last days, for example "+3/day over 7d" (docs/self-service.md).
	// +optional
	UsageTrend string `json:"usageTrend,omitempty" protobuf:"bytes,11,opt,name=usageTrend"`
	// fullIn says when, at that rate, the bucket is full: "about 9 days",
	// "not filling", or "too little history to tell".
	// +optional
	FullIn string `json:"fullIn,omitempty" protobuf:"bytes,12,opt,name=fullIn"`
	// estimatedFullAt is the moment fullIn estimates, when it estimates one.
	// +optional
	EstimatedFullAt *metav1.Time `json:"estimatedFullAt,omitempty" protobuf:"bytes,13,opt,name=estimatedFullAt"`
	// usedPercent is allocated as a whole percent of limit (rounded down;
	// above 100 when over the limit); unset when the limit is 0.
	// +optional
	UsedPercent *int32 `json:"usedPercent,omitempty" protobuf:"varint,15,opt,name=usedPercent"`

	// conditions: OverLimit is True when allocated exceeds limit, for example
	// after a grant was lowered; nothing is revoked.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,14,rep,name=conditions"`

	// placement says which copy of the bucket this object is: Own, where
	// the bucket lives (its consumer's namespace, docs/conditions.md "Where
	// buckets live"), or Projection, a copy with the same name and numbers
	// shown in another namespace (a project's plane, a group's member, a
	// Namespace), labelled quota.miloapis.com/projected-from with the
	// namespace of its own.
	// +optional
	Placement BucketPlacement `json:"placement,omitempty" protobuf:"bytes,16,opt,name=placement,casttype=BucketPlacement"`
}

// BucketPlacement says which copy of a bucket an AllowanceBucket object is.
// +kubebuilder:validation:Enum=Own;Projection
type BucketPlacement string

const (
	// BucketPlacementOwn: the bucket where it lives.
	BucketPlacementOwn BucketPlacement = "Own"
	// BucketPlacementProjection: a copy shown in another namespace.
	BucketPlacementProjection BucketPlacement = "Projection"
)

// AllowanceBucket is the live limit, allocation and availability of one
// consumer for one resource type and dimension set. Its columns are what a
// person reads first (used, limit, percent) and which copy the object is
// (placement); -o wide adds the consumer's kind and name and the unit,
// within 190 columns with the 71-character bucket names for resource types
// up to about 30 characters. The rest (available, claims, trend, full in)
// is in -o yaml or custom-columns.
// +kubebuilder:object:root=true
// +genclient
// +kubebuilder:resource:shortName=bucket;abucket,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Resource Type",type=string,JSONPath=`.spec.resourceType`
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.allocated`
// +kubebuilder:printcolumn:name="Limit",type=integer,JSONPath=`.status.limit`
// +kubebuilder:printcolumn:name="Used%",type=integer,JSONPath=`.status.usedPercent`
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.status.placement`
// +kubebuilder:printcolumn:name="Consumer Kind",type=string,JSONPath=`.spec.consumerRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`,priority=1
// +kubebuilder:printcolumn:name="Unit",type=string,JSONPath=`.status.baseUnit`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.resourceType`
type AllowanceBucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec identifies what the bucket accounts for.
	// +required
	Spec AllowanceBucketSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status holds the live numbers.
	// +optional
	Status AllowanceBucketStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// AllowanceBucketList is a list of AllowanceBuckets.
// +kubebuilder:object:root=true
type AllowanceBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []AllowanceBucket `json:"items" protobuf:"bytes,2,rep,name=items"`
}
