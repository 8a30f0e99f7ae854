package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QuotaRequestState says where a request is.
// +kubebuilder:validation:Enum=Pending;Approved;Denied;Withdrawn
type QuotaRequestState string

const (
	// QuotaRequestPending: asked, not decided yet.
	QuotaRequestPending QuotaRequestState = "Pending"
	// QuotaRequestApproved: decided and applied; status.grantedLimit is the
	// consumer's limit it set (it may be less than asked).
	QuotaRequestApproved QuotaRequestState = "Approved"
	// QuotaRequestDenied: decided against; status.decision.reason says why.
	QuotaRequestDenied QuotaRequestState = "Denied"
	// QuotaRequestWithdrawn: the tenant took the request back before it was
	// decided.
	QuotaRequestWithdrawn QuotaRequestState = "Withdrawn"
)

// QuotaRequestVerdict is a decision on a request.
// +kubebuilder:validation:Enum=Approve;Deny
type QuotaRequestVerdict string

const (
	// VerdictApprove approves the request, in full or up to grantedLimit.
	VerdictApprove QuotaRequestVerdict = "Approve"
	// VerdictDeny denies the request; reason is required.
	VerdictDeny QuotaRequestVerdict = "Deny"
)

// Labels and annotations of quota requests and the grants they make.
const (
	// LabelQuotaRequest is set on the ResourceGrant an approved request
	// made: its value is the request's name (in the same namespace).
	LabelQuotaRequest = "quota.miloapis.com/quota-request"
	// AnnotationRequestedBy is the user who created a QuotaRequest. serve's
	// admission sets it at create, replacing whatever the client sent.
	AnnotationRequestedBy = "quota.miloapis.com/requested-by"
	// QuotaRequestCondition is the condition type that says whether a
	// request is decided and applied.
	QuotaRequestCondition = "Decided"
)

// QuotaRequestSpec is what a tenant asks for. Only withdrawn may change
// once the request is made: what staff or a rule decide is what was asked
// when it was created.
// +kubebuilder:validation:XValidation:rule="size(self.consumerRef.name) > 0",message="name the consumer whose limit should change in spec.consumerRef.name (its organization or one of its projects)",fieldPath=".consumerRef.name"
// +kubebuilder:validation:XValidation:rule="self.consumerRef == oldSelf.consumerRef",message="spec.consumerRef cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".consumerRef"
// +kubebuilder:validation:XValidation:rule="self.resourceType == oldSelf.resourceType",message="spec.resourceType cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".resourceType"
// +kubebuilder:validation:XValidation:rule="has(self.dimensions) == has(oldSelf.dimensions) && (!has(self.dimensions) || self.dimensions == oldSelf.dimensions)",message="spec.dimensions cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".dimensions"
// +kubebuilder:validation:XValidation:rule="self.requestedLimit == oldSelf.requestedLimit",message="spec.requestedLimit cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".requestedLimit"
// +kubebuilder:validation:XValidation:rule="self.justification == oldSelf.justification",message="spec.justification cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".justification"
// +kubebuilder:validation:XValidation:rule="has(self.contact) == has(oldSelf.contact) && (!has(self.contact) || self.contact == oldSelf.contact)",message="spec.contact cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".contact"
// +kubebuilder:validation:XValidation:rule="has(self.__for__) == has(oldSelf.__for__) && (!has(self.__for__) || self.__for__ == oldSelf.__for__)",message="spec.for cannot change once the request is made: withdraw it (spec.withdrawn: true) and create a new request",fieldPath=".for"
// +kubebuilder:validation:XValidation:rule="!has(self.__for__) || duration(self.__for__) >= duration('10s')",message="spec.for is how long a temporary increase lasts and must be at least 10s (a grant's window is kept in whole seconds, and a shorter one could end before its grant is written), for example 720h; remove it to ask for a permanent limit",fieldPath=".for"
type QuotaRequestSpec struct {
	// consumerRef is the consumer whose limit should change: the
	// organization of the request's namespace, or one of its projects.
	// +required
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`
	// resourceType is the registered resource type, for example
	// compute.example.com/cpus.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,2,opt,name=resourceType,casttype=ResourceType"`
	// dimensions narrow the limit asked for to one dimension set, as a
	// grant bucket's do.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []Dimension `json:"dimensions,omitempty" protobuf:"bytes,3,rep,name=dimensions"`
	// requestedLimit is the limit asked for, in the registration's baseUnit:
	// the whole limit, not the increase. Below the current limit it is a
	// decrease, applied at once unless it would go below current usage.
	// +required
	// +kubebuilder:validation:Minimum=0
	RequestedLimit int64 `json:"requestedLimit" protobuf:"varint,4,opt,name=requestedLimit"`
	// justification says why the limit is needed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2000
	Justification string `json:"justification" protobuf:"bytes,5,opt,name=justification"`
	// contact is whom staff should contact about the request.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Contact string `json:"contact,omitempty" protobuf:"bytes,6,opt,name=contact"`
	// withdrawn, set by the tenant while the request is pending, takes the
	// request back.
	// +optional
	Withdrawn bool `json:"withdrawn,omitempty" protobuf:"varint,7,opt,name=withdrawn"`
	// for makes the request a temporary increase: once approved, its grant
	// expires this long after the approval is applied ("720h" for 30 days),
	// on top of the limit then. Without it the request sets the permanent
	// limit, planned without the windowed grants counting now. A decrease
	// cannot be temporary.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	For *metav1.Duration `json:"for,omitempty" protobuf:"bytes,8,opt,name=for"`
}

// QuotaRequestDecision is staff's decision (or an approval rule's), written
// through the status subresource, which tenants may not write.
// +kubebuilder:validation:XValidation:rule="self.verdict != 'Deny' || (has(self.reason) && size(self.reason) > 0)",message="a denial needs a reason in status.decision.reason: the tenant reads it",fieldPath=".reason"
// +kubebuilder:validation:XValidation:rule="self.verdict != 'Deny' || !has(self.grantedLimit)",message="a denial grants nothing: remove status.decision.grantedLimit",fieldPath=".grantedLimit"
type QuotaRequestDecision struct {
	// verdict is Approve or Deny.
	// +required
	Verdict QuotaRequestVerdict `json:"verdict" protobuf:"bytes,1,opt,name=verdict,casttype=QuotaRequestVerdict"`
	// grantedLimit, with Approve, approves part of the request: the limit
	// to set, at most spec.requestedLimit. Omitted: the request in full.
	// +optional
	// +kubebuilder:validation:Minimum=0
	GrantedLimit *int64 `json:"grantedLimit,omitempty" protobuf:"varint,2,opt,name=grantedLimit"`
	// reason is said to the tenant: required to deny.
	// +optional
	// +kubebuilder:validation:MaxLength=2000
	Reason string `json:"reason,omitempty" protobuf:"bytes,3,opt,name=reason"`
	// decidedBy is who decided: the user (serve's admission records it,
	// replacing whatever the client sent), or rule:<name> for an approval
	// rule, or quotaplane for a decrease applied at once.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	DecidedBy string `json:"decidedBy,omitempty" protobuf:"bytes,4,opt,name=decidedBy"`
	// rule is the QuotaApprovalRule that approved the request.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Rule string `json:"rule,omitempty" protobuf:"bytes,5,opt,name=rule"`
	// decidedAt is when.
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty" protobuf:"bytes,6,opt,name=decidedAt"`
	// consumerRef is the consumer decided for: spec.consumerRef when the
	// decision was written. serve's admission records it (replacing
	// whatever the client sent); an approval's grant is written for it.
	// +optional
	ConsumerRef *ConsumerRef `json:"consumerRef,omitempty" protobuf:"bytes,7,opt,name=consumerRef"`
	// resourceType is the resource type decided: spec.resourceType when the
	// decision was written, recorded as consumerRef is.
	// +optional
	ResourceType ResourceType `json:"resourceType,omitempty" protobuf:"bytes,8,opt,name=resourceType,casttype=ResourceType"`
	// dimensions are the dimensions decided: spec.dimensions when the
	// decision was written, recorded as consumerRef is.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []Dimension `json:"dimensions,omitempty" protobuf:"bytes,9,rep,name=dimensions"`
}

// QuotaUsageSnapshot is a bucket's numbers at one moment.
type QuotaUsageSnapshot struct {
	// limit of the consumer's bucket then.
	Limit int64 `json:"limit" protobuf:"varint,1,opt,name=limit"`
	// allocated in it then.
	Allocated int64 `json:"allocated" protobuf:"varint,2,opt,name=allocated"`
	// at is when they were read.
	// +optional
	At *metav1.Time `json:"at,omitempty" protobuf:"bytes,3,opt,name=at"`
}

// QuotaRequestGrant names the ResourceGrant an approved request made.
type QuotaRequestGrant struct {
	// name of the ResourceGrant, in the request's namespace.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// amount it grants: the difference between the limit approved and the
	// limit when the request was decided.
	Amount int64 `json:"amount" protobuf:"varint,2,opt,name=amount"`
	// expiresAt, for a temporary increase (spec.for), is when its grant
	// stops counting: spec.for after the approval was applied.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty" protobuf:"bytes,3,opt,name=expiresAt"`
}

// QuotaRequestStatus is where the request is, and what was decided.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.decision) || (has(self.decision) && self.decision == oldSelf.decision)",message="status.decision is final once made: create a new request to change the limit again",fieldPath=".decision"
type QuotaRequestStatus struct {
	// state is Pending, Approved, Denied or Withdrawn.
	// +optional
	State QuotaRequestState `json:"state,omitempty" protobuf:"bytes,1,opt,name=state,casttype=QuotaRequestState"`
	// requestedBy is who asked (the annotation serve's admission sets).
	// +optional
	RequestedBy string `json:"requestedBy,omitempty" protobuf:"bytes,2,opt,name=requestedBy"`
	// atRequest is the consumer's bucket when the request was first seen.
	// +optional
	AtRequest *QuotaUsageSnapshot `json:"atRequest,omitempty" protobuf:"bytes,3,opt,name=atRequest"`
	// decision is staff's or a rule's decision.
	// +optional
	Decision *QuotaRequestDecision `json:"decision,omitempty" protobuf:"bytes,4,opt,name=decision"`
	// limitAtDecision is the consumer's limit when the decision was applied.
	// +optional
	LimitAtDecision *int64 `json:"limitAtDecision,omitempty" protobuf:"varint,5,opt,name=limitAtDecision"`
	// grantedLimit is the limit the approval set: at most
	// spec.requestedLimit.
	// +optional
	GrantedLimit *int64 `json:"grantedLimit,omitempty" protobuf:"varint,6,opt,name=grantedLimit"`
	// grant is the ResourceGrant the approval made (none when the limit
	// was already there, or for a decrease).
	// +optional
	Grant *QuotaRequestGrant `json:"grant,omitempty" protobuf:"bytes,7,opt,name=grant"`
	// reducedGrants are the grants of earlier requests a decrease lowered.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	ReducedGrants []QuotaRequestGrant `json:"reducedGrants,omitempty" protobuf:"bytes,8,rep,name=reducedGrants"`
	// message says, in a sentence, where the request is and what happens
	// next.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,9,opt,name=message"`
	// conditions: Decided is True once the decision is applied.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,10,rep,name=conditions"`
}

// QuotaRequest asks the platform to change a consumer's limit for one
// resource type. Tenants create it in their organization's namespace; staff
// decide it through the status subresource; an approval makes a
// ResourceGrant for the difference, labelled with the request.
// +kubebuilder:object:root=true
// +genclient
// +kubebuilder:resource:shortName=qreq;quotareq,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerRef.name`
// +kubebuilder:printcolumn:name="Resource Type",type=string,JSONPath=`.spec.resourceType`
// +kubebuilder:printcolumn:name="Requested",type=integer,JSONPath=`.spec.requestedLimit`
// +kubebuilder:printcolumn:name="Granted",type=integer,JSONPath=`.status.grantedLimit`
// +kubebuilder:printcolumn:name="For",type=string,JSONPath=`.spec.for`,priority=1
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Consumer Type",type=string,JSONPath=`.spec.consumerRef.kind`,priority=1
// +kubebuilder:printcolumn:name="Requested By",type=string,JSONPath=`.status.requestedBy`,priority=1
// +kubebuilder:printcolumn:name="Decided By",type=string,JSONPath=`.status.decision.decidedBy`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.consumerRef.name`
// +kubebuilder:selectablefield:JSONPath=`.status.state`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.state) || oldSelf.status.state == 'Pending' || self.spec == oldSelf.spec",message="the request is decided and can no longer be changed: create a new request",fieldPath=".spec"
// +kubebuilder:validation:XValidation:rule="!has(self.status) || !has(self.status.decision) || !has(self.status.decision.grantedLimit) || self.status.decision.grantedLimit <= self.spec.requestedLimit",message="status.decision.grantedLimit may not exceed spec.requestedLimit: approve at most what was asked",fieldPath=".status.decision.grantedLimit"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.spec.withdrawn) || !oldSelf.spec.withdrawn || (has(self.spec.withdrawn) && self.spec.withdrawn)",message="a withdrawn request stays withdrawn: create a new request",fieldPath=".spec.withdrawn"
type QuotaRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	// spec is what is asked.
	// +required
	Spec QuotaRequestSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status is where the request is and what was decided.
	// +optional
	Status QuotaRequestStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// QuotaRequestList is a list of QuotaRequests.
// +kubebuilder:object:root=true
type QuotaRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []QuotaRequest `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// QuotaApprovalRuleSpec approves requests without a person.
type QuotaApprovalRuleSpec struct {
	// description says what the rule allows, for the people reading the
	// requests it approved.
	// +optional
	// +kubebuilder:validation:MaxLength=1000
	Description string `json:"description,omitempty" protobuf:"bytes,1,opt,name=description"`
	// resourceTypes limits the rule to these resource types; empty: any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	ResourceTypes []ResourceType `json:"resourceTypes,omitempty" protobuf:"bytes,2,rep,name=resourceTypes,casttype=ResourceType"`
	// expression is a CEL expression that is true for the requests the rule
	// approves in full. Its variables: request (the QuotaRequest: spec,
	// metadata), consumer (the consumer object: Organization or Project),
	// organization (the request's Organization), and usage (limit,
	// allocated, available: the consumer's bucket now). For example, up to
	// twice the limit for Standard organizations:
	// organization.spec.type == 'Standard' && request.spec.requestedLimit <= 2 * usage.limit
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression" protobuf:"bytes,3,opt,name=expression"`
}

// QuotaApprovalRuleStatus says whether the rule is in use.
type QuotaApprovalRuleStatus struct {
	// observedGeneration is the generation last compiled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`
	// conditions: Ready is False, with the compiler's message, when the
	// expression does not compile; such a rule approves nothing.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`
}

// QuotaApprovalRule approves quota requests that its expression allows,
// and says so on the request (status.decision.rule). Requests no rule
// allows wait for staff.
// +kubebuilder:object:root=true
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=qrule,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Expression",type=string,JSONPath=`.spec.expression`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type QuotaApprovalRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	// spec is the rule.
	// +required
	Spec QuotaApprovalRuleSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status says whether it compiles.
	// +optional
	Status QuotaApprovalRuleStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// QuotaApprovalRuleList is a list of QuotaApprovalRules.
// +kubebuilder:object:root=true
type QuotaApprovalRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []QuotaApprovalRule `json:"items" protobuf:"bytes,2,rep,name=items"`
}
