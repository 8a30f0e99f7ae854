package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TriggerResource names the kind whose objects trigger a policy.
type TriggerResource struct {
	// apiVersion is the group/version of the trigger kind, for example
	// resourcemanager.miloapis.com/v1alpha1, or v1 for the core group. Any
	// served version of the kind matches.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	APIVersion string `json:"apiVersion" protobuf:"bytes,1,opt,name=apiVersion"`

	// kind is the trigger kind, for example Project.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`
}

// Constraint is a CEL expression that must be true for a policy to apply.
type Constraint struct {
	// expression is a CEL expression returning bool over `trigger` (the
	// object), `user` (name, groups, extra) and `requestInfo`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression" protobuf:"bytes,1,opt,name=expression"`

	// message is shown when the constraint is false, for documentation.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty" protobuf:"bytes,2,opt,name=message"`
}

// Trigger selects the objects a policy applies to.
type Trigger struct {
	// resource is the kind that triggers the policy.
	// +required
	Resource TriggerResource `json:"resource" protobuf:"bytes,1,opt,name=resource"`

	// constraints must all be true for the policy to apply to an object.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Constraints []Constraint `json:"constraints,omitempty" protobuf:"bytes,2,rep,name=constraints"`

	// namespaceSelector scopes a ClaimCreationPolicy to the namespaces
	// whose labels it selects, as ResourceQuota users scope quota by
	// namespace; objects of other namespaces are not charged. Unset: every
	// namespace except the exempt ones (quotaplane serve's
	// --quota-exempt-namespaces, by default kube-system, kube-public and
	// kube-node-lease). Set, it replaces that default: every namespace it
	// selects is charged, including those. Namespaces carry the label
	// kubernetes.io/metadata.name, so a selector can name namespaces. The
	// engine's system namespace is never charged. Cluster-scoped trigger
	// kinds have no namespace and ignore it; GrantCreationPolicies do not
	// take it.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty" protobuf:"bytes,3,opt,name=namespaceSelector"`
}

// TemplateMetadata is the metadata of an object rendered from a template.
// String values may contain {{ CEL }} segments.
type TemplateMetadata struct {
	// name of the rendered object. Generated when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name,omitempty" protobuf:"bytes,1,opt,name=name"`

	// generateName is the prefix of a generated name.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	GenerateName string `json:"generateName,omitempty" protobuf:"bytes,2,opt,name=generateName"`

	// namespace of the rendered object.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,3,opt,name=namespace"`

	// labels of the rendered object.
	// +optional
	Labels map[string]string `json:"labels,omitempty" protobuf:"bytes,4,rep,name=labels"`

	// annotations of the rendered object.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty" protobuf:"bytes,5,rep,name=annotations"`
}

// TemplateDimension is a dimension whose value may be a {{ CEL }} template.
type TemplateDimension struct {
	// key is the dimension name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Key string `json:"key" protobuf:"bytes,1,opt,name=key"`

	// value is the dimension value or a template for it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value" protobuf:"bytes,2,opt,name=value"`
}

// TemplateConsumerRef is a consumerRef whose name and namespace may be
// {{ CEL }} templates.
type TemplateConsumerRef struct {
	// apiGroup is the API group of the consumer.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`

	// kind is the kind of the consumer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`

	// name is the consumer's name or a template for it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Name string `json:"name" protobuf:"bytes,3,opt,name=name"`

	// namespace is the consumer's namespace or a template for it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,4,opt,name=namespace"`
}

// ClaimTemplateRequest is a request whose amount may be computed.
type ClaimTemplateRequest struct {
	// resourceType is a registered resource type, or a template for one.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ResourceType string `json:"resourceType" protobuf:"bytes,1,opt,name=resourceType"`

	// amount is a positive integer, or a string holding a {{ CEL }}
	// expression over the trigger object that yields one, for example
	// "{{ trigger.spec.cpu * 1000 }}".
	// +required
	// +kubebuilder:validation:XIntOrString
	Amount intstr.IntOrString `json:"amount" protobuf:"bytes,2,opt,name=amount"`

	// dimensions of the request; values may be templates.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []TemplateDimension `json:"dimensions,omitempty" protobuf:"bytes,3,rep,name=dimensions"`
}

// ResourceClaimTemplateSpec is the spec of the claims a policy creates.
type ResourceClaimTemplateSpec struct {
	// consumerRef is the consumer charged. Optional, as in the reference
	// implementation: when omitted, the consumer is the project whose
	// control plane the request came to; a create at the root under a
	// policy without one is refused, naming the policy.
	// +optional
	ConsumerRef TemplateConsumerRef `json:"consumerRef,omitzero" protobuf:"bytes,1,opt,name=consumerRef"`

	// requests are the amounts claimed.
	// +required
	// +listType=map
	// +listMapKey=resourceType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Requests []ClaimTemplateRequest `json:"requests" protobuf:"bytes,2,rep,name=requests"`
}

// ResourceClaimTemplate is the template of the claims a policy creates.
type ResourceClaimTemplate struct {
	// metadata of the rendered claim.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec of the rendered claim.
	// +required
	Spec ResourceClaimTemplateSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
}

// FailurePolicy says what admission does when a governed create cannot be
// decided (the engine is unavailable or too slow).
// +kubebuilder:validation:Enum=Fail;Ignore
type FailurePolicy string

const (
	// FailurePolicyFail refuses the create (the default): quota is never
	// silently skipped.
	FailurePolicyFail FailurePolicy = "Fail"
	// FailurePolicyIgnore admits the create without a claim, records an
	// audit annotation and an Event. Quota is not enforced for that object.
	FailurePolicyIgnore FailurePolicy = "Ignore"
)

// PolicyMode is how a generation of a ClaimCreationPolicy acts on the creates
// it matches.
// +kubebuilder:validation:Enum=Enforce;Warn;Audit
type PolicyMode string

const (
	// PolicyModeEnforce charges every matching create, and refuses it when
	// its claim does not fit or the policy cannot be evaluated for it. An
	// absent mode is Enforce, as before modes existed.
	PolicyModeEnforce PolicyMode = "Enforce"
	// PolicyModeWarn admits every matching create, charges nothing, and
	// warns the client with what enforcing would have charged or refused
	// and why.
	PolicyModeWarn PolicyMode = "Warn"
	// PolicyModeAudit admits every matching create and charges nothing; what
	// enforcing would have done is recorded (an audit annotation, the
	// admission metric with mode="audit", and the policy's status.impact).
	PolicyModeAudit PolicyMode = "Audit"
)

// ModeOf is a spec's mode, Enforce when absent.
func ModeOf(m PolicyMode) PolicyMode {
	if m == "" {
		return PolicyModeEnforce
	}
	return m
}

// ClaimTarget is what a ClaimCreationPolicy creates.
type ClaimTarget struct {
	// resourceClaimTemplate is rendered into a ResourceClaim for each
	// matching create.
	// +required
	ResourceClaimTemplate ResourceClaimTemplate `json:"resourceClaimTemplate" protobuf:"bytes,1,opt,name=resourceClaimTemplate"`
}

// ClaimCreationPolicySpec says which creations consume which quota.
// +kubebuilder:validation:XValidation:rule="!has(self.staged) || !self.staged || (has(self.mode) && self.mode != 'Enforce')",message="staged tries a Warn or Audit generation beside the enforced one: set mode to Warn or Audit, or remove staged",fieldPath=".staged"
type ClaimCreationPolicySpec struct {
	// trigger selects the creates that consume quota.
	// +required
	Trigger Trigger `json:"trigger" protobuf:"bytes,1,opt,name=trigger"`

	// target is the claim each matching create makes.
	// +required
	Target ClaimTarget `json:"target" protobuf:"bytes,2,opt,name=target"`

	// disabled turns the policy off without deleting it.
	// +optional
	// +kubebuilder:default=false
	Disabled bool `json:"disabled" protobuf:"varint,3,opt,name=disabled"`

	// failurePolicy is Fail (default) or Ignore: what to do when a create
	// cannot be decided in time. Ignore is audited.
	// +optional
	// +kubebuilder:default=Fail
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty" protobuf:"bytes,4,opt,name=failurePolicy,casttype=FailurePolicy"`

	// mode is how this generation acts on the creates it matches: Enforce
	// (absent means Enforce) charges them and refuses what does not fit or
	// cannot be evaluated; Warn and Audit admit them and charge nothing,
	// Warn telling the client what enforcing would have done, Audit
	// recording it. In every mode the requester must be allowed to charge
	// the consumer a rendered claim names, or the create is refused.
	// Switching to Enforce charges the objects stored meanwhile, as a policy
	// coming into force does (status.existingObjects).
	// +optional
	Mode PolicyMode `json:"mode,omitempty" protobuf:"bytes,5,opt,name=mode,casttype=PolicyMode"`

	// staged, with mode Warn or Audit, tries this generation beside the one
	// enforced before it, which keeps enforcing (status.enforced) until a
	// generation with mode Enforce is judged valid: an edit is tried before
	// it replaces what enforces. Without it, a Warn or Audit generation
	// stops enforcement at once, as spec.disabled does.
	// +optional
	Staged bool `json:"staged,omitempty" protobuf:"varint,6,opt,name=staged"`
}

// PolicyStatus is the observed state of a policy.
type PolicyStatus struct {
	// observedGeneration is the generation last validated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// conditions: Ready says whether the policy is valid and in force.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`

	// typeChecking is what checking the expressions against the trigger
	// kind's schema found that does not stop the policy from being Ready:
	// a field no served version of the kind declares (at admission, an
	// object without it refuses the create), or a trigger kind that is not
	// served. Kubernetes' ValidatingAdmissionPolicy reports the same way.
	// Written by the quota engine only.
	// +optional
	TypeChecking *TypeChecking `json:"typeChecking,omitempty" protobuf:"bytes,3,opt,name=typeChecking"`
}

// TypeChecking lists the warnings of checking a policy against the schema
// of its trigger kind.
type TypeChecking struct {
	// expressionWarnings are the warnings, each on the field it is about.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ExpressionWarnings []ExpressionWarning `json:"expressionWarnings,omitempty" protobuf:"bytes,1,rep,name=expressionWarnings"`
}

// ExpressionWarning is one warning of type checking.
type ExpressionWarning struct {
	// fieldRef is the path of the field the warning is about, for example
	// spec.trigger.constraints[0].expression.
	FieldRef string `json:"fieldRef" protobuf:"bytes,1,opt,name=fieldRef"`
	// warning says what was found and what to do.
	Warning string `json:"warning" protobuf:"bytes,2,opt,name=warning"`
}

// ClaimCreationPolicyStatus is the observed state of a ClaimCreationPolicy.
type ClaimCreationPolicyStatus struct {
	PolicyStatus `json:",inline" protobuf:"bytes,1,opt,name=policyStatus"`

	// enforced is the last version of the policy judged valid: admission
	// enforces it while a newer generation is not yet judged or is invalid,
	// so that editing a policy never opens a window where its kind is
	// created uncharged. Written by the quota engine only.
	// +optional
	Enforced *EnforcedClaimPolicy `json:"enforced,omitempty" protobuf:"bytes,2,opt,name=enforced"`

	// existingObjects says what the engine charged, for the enforced
	// generation, to objects that existed before it was in force (created
	// while the policy was disabled, before it was created, or before an
	// edit widened its trigger). Written by the quota engine only.
	// +optional
	ExistingObjects *ExistingObjectsStatus `json:"existingObjects,omitempty" protobuf:"bytes,3,opt,name=existingObjects"`

	// mode is what admission applies now: Enforce, Warn or Audit, or
	// Enforce+Warn and Enforce+Audit while a staged generation is tried
	// beside the enforced one; empty when nothing (disabled, or never
	// valid). Written by the quota engine only.
	// +optional
	Mode string `json:"mode,omitempty" protobuf:"bytes,6,opt,name=mode"`

	// trial is the last valid generation whose mode is Warn or Audit: it is
	// evaluated on every matching create and charges nothing. Written by
	// the quota engine only.
	// +optional
	Trial *TrialClaimPolicy `json:"trial,omitempty" protobuf:"bytes,4,opt,name=trial"`

	// impact is what the trial generation would do to the objects that
	// exist if it came into force, refreshed while it runs: how many it
	// matches, would charge, would refuse and cannot evaluate, the
	// consumers it would put over their limits and the evaluation errors,
	// each list bounded. Written by the quota engine only.
	// +optional
	Impact *PolicyImpact `json:"impact,omitempty" protobuf:"bytes,5,opt,name=impact"`
}

// TrialClaimPolicy is a validated copy of a generation that runs in Warn or
// Audit.
type TrialClaimPolicy struct {
	// generation is the policy generation this copy was taken from.
	Generation int64 `json:"generation" protobuf:"varint,1,opt,name=generation"`
	// mode is Warn or Audit.
	Mode PolicyMode `json:"mode" protobuf:"bytes,2,opt,name=mode,casttype=PolicyMode"`
	// staged says whether the enforced generation keeps enforcing beside it.
	// +optional
	Staged bool `json:"staged,omitempty" protobuf:"varint,3,opt,name=staged"`
	// trigger as validated.
	Trigger Trigger `json:"trigger" protobuf:"bytes,4,opt,name=trigger"`
	// target as validated.
	Target ClaimTarget `json:"target" protobuf:"bytes,5,opt,name=target"`
}

// MaxImpactConsumers bounds status.impact.overLimit, and MaxImpactErrors
// status.impact.evaluationErrors and reasons, whatever the number of objects
// and consumers.
const (
	MaxImpactConsumers = 10
	MaxImpactErrors    = 5
)

// PolicyImpact is what a generation of a policy would do to the objects that
// exist if it came into force.
type PolicyImpact struct {
	// generation is the generation evaluated.
	Generation int64 `json:"generation" protobuf:"varint,1,opt,name=generation"`
	// mode is the mode it ran in.
	// +optional
	Mode PolicyMode `json:"mode,omitempty" protobuf:"bytes,2,opt,name=mode,casttype=PolicyMode"`
	// objects is how many objects of the trigger kind were examined.
	Objects int64 `json:"objects" protobuf:"varint,3,opt,name=objects"`
	// matched is how many of them the policy applies to.
	Matched int64 `json:"matched" protobuf:"varint,4,opt,name=matched"`
	// alreadyCharged is how many of those hold a claim of this policy
	// already (charged by an enforced generation): coming into force
	// leaves them as they are.
	// +optional
	AlreadyCharged int64 `json:"alreadyCharged,omitempty" protobuf:"varint,5,opt,name=alreadyCharged"`
	// wouldCharge is how many it would charge that fit, taken in creation
	// order after what is allocated now.
	WouldCharge int64 `json:"wouldCharge" protobuf:"varint,6,opt,name=wouldCharge"`
	// wouldRefuse is how many it would charge that do not fit: created now,
	// in that order, they would be refused. Coming into force charges them
	// anyway (the objects exist), over the limit.
	WouldRefuse int64 `json:"wouldRefuse" protobuf:"varint,7,opt,name=wouldRefuse"`
	// failedToEvaluate is how many it cannot be evaluated for, or renders
	// a claim for that cannot be stored: enforcing, their creates would be
	// refused; coming into force leaves them uncharged and reported.
	FailedToEvaluate int64 `json:"failedToEvaluate" protobuf:"varint,8,opt,name=failedToEvaluate"`
	// reasons count the objects not charged, or refused, by reason.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Reasons []ImpactReason `json:"reasons,omitempty" protobuf:"bytes,9,rep,name=reasons"`
	// consumersOverLimit is how many buckets it would put over their limit.
	ConsumersOverLimit int64 `json:"consumersOverLimit" protobuf:"varint,10,opt,name=consumersOverLimit"`
	// overLimit are the buckets it would put furthest over their limits,
	// at most 10, largest excess first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	OverLimit []ConsumerImpact `json:"overLimit,omitempty" protobuf:"bytes,11,rep,name=overLimit"`
	// evaluationErrors are the distinct errors of evaluating it, at most 5,
	// each with the field it is about and an example object.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5
	EvaluationErrors []EvaluationError `json:"evaluationErrors,omitempty" protobuf:"bytes,12,rep,name=evaluationErrors"`
	// message sums the above up for a person.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty" protobuf:"bytes,13,opt,name=message"`
	// completionTime is when the evaluation ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty" protobuf:"bytes,14,opt,name=completionTime"`
}

// ImpactReason counts the objects of one reason.
type ImpactReason struct {
	// reason is QuotaExceeded, EvaluationFailed, InvalidClaim, NoConsumer,
	// ConsumerNotAllowed or NamespaceNotOpen.
	Reason string `json:"reason" protobuf:"bytes,1,opt,name=reason"`
	// count is how many objects.
	Count int64 `json:"count" protobuf:"varint,2,opt,name=count"`
}

// ConsumerImpact is what a policy would do to one bucket of one consumer.
type ConsumerImpact struct {
	// consumerRef is the consumer charged.
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`
	// resourceType is the bucket's resource type.
	ResourceType string `json:"resourceType" protobuf:"bytes,2,opt,name=resourceType"`
	// dimensions is the bucket's dimensions, key=value joined by commas.
	// +optional
	Dimensions string `json:"dimensions,omitempty" protobuf:"bytes,3,opt,name=dimensions"`
	// limit is the bucket's limit now (0 when no grant gives it one).
	Limit int64 `json:"limit" protobuf:"varint,4,opt,name=limit"`
	// allocated is what is allocated now.
	Allocated int64 `json:"allocated" protobuf:"varint,5,opt,name=allocated"`
	// allocatedAfter is what would be allocated once the policy came into
	// force and charged every object it matches.
	AllocatedAfter int64 `json:"allocatedAfter" protobuf:"varint,6,opt,name=allocatedAfter"`
	// objects is how many objects it would charge to this bucket.
	Objects int64 `json:"objects" protobuf:"varint,7,opt,name=objects"`
	// wouldRefuse is how many of them would not fit.
	// +optional
	WouldRefuse int64 `json:"wouldRefuse,omitempty" protobuf:"varint,8,opt,name=wouldRefuse"`
}

// EvaluationError is one distinct error of evaluating a policy.
type EvaluationError struct {
	// fieldRef is the field of the policy whose expression failed, for
	// example spec.target.resourceClaimTemplate.spec.requests[0].amount.
	FieldRef string `json:"fieldRef" protobuf:"bytes,1,opt,name=fieldRef"`
	// message is the error.
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message" protobuf:"bytes,2,opt,name=message"`
	// example is one object it failed for: Kind [namespace/]name, and its
	// control plane when not the root.
	Example string `json:"example" protobuf:"bytes,3,opt,name=example"`
	// count is how many objects it failed for with this error.
	Count int64 `json:"count" protobuf:"varint,4,opt,name=count"`
}

// ExistingObjectsStatus is the outcome of charging the objects that already
// existed when a generation of a ClaimCreationPolicy came into force.
type ExistingObjectsStatus struct {
	// generation is the enforced generation the existing objects were
	// charged for.
	Generation int64 `json:"generation" protobuf:"varint,1,opt,name=generation"`

	// request is the value of the annotation
	// quota.miloapis.com/charge-existing this pass answered (quotaplane
	// verify --repair sets it to ask for a new pass).
	// +optional
	Request string `json:"request,omitempty" protobuf:"bytes,2,opt,name=request"`

	// objects is how many objects of the trigger kind were examined.
	Objects int64 `json:"objects" protobuf:"varint,3,opt,name=objects"`

	// charged is how many of them the policy governs and held no claim of
	// it, and were charged.
	Charged int64 `json:"charged" protobuf:"varint,4,opt,name=charged"`

	// overLimit is how many of those charges put a bucket over its limit:
	// they are granted anyway (the objects exist); the bucket shows it is
	// over and new creates are refused until usage falls.
	OverLimit int64 `json:"overLimit" protobuf:"varint,5,opt,name=overLimit"`

	// notCharged is how many objects the policy could not be evaluated for,
	// or whose claim could not be written; message names the first few.
	// +optional
	NotCharged int64 `json:"notCharged,omitempty" protobuf:"varint,6,opt,name=notCharged"`

	// message says what was charged, and what was not and why.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty" protobuf:"bytes,7,opt,name=message"`

	// completionTime is when the pass ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty" protobuf:"bytes,8,opt,name=completionTime"`
}

// EnforcedClaimPolicy is a validated copy of a policy's spec.
type EnforcedClaimPolicy struct {
	// generation is the policy generation this copy was taken from.
	Generation int64 `json:"generation" protobuf:"varint,1,opt,name=generation"`
	// trigger as validated.
	Trigger Trigger `json:"trigger" protobuf:"bytes,2,opt,name=trigger"`
	// target as validated.
	Target ClaimTarget `json:"target" protobuf:"bytes,3,opt,name=target"`
	// failurePolicy as validated.
	// +optional
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty" protobuf:"bytes,4,opt,name=failurePolicy,casttype=FailurePolicy"`
}

// ClaimCreationPolicy makes creations of a kind consume quota: each matching
// create is admitted only when the claim rendered from the template is granted.
// +kubebuilder:object:root=true
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=ccp,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.trigger.resource.kind`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.mode`
// +kubebuilder:printcolumn:name="Would-Refuse",type=integer,JSONPath=`.status.impact.wouldRefuse`,priority=1
// +kubebuilder:printcolumn:name="Eval-Errors",type=integer,JSONPath=`.status.impact.failedToEvaluate`,priority=1
// +kubebuilder:printcolumn:name="Over",type=integer,JSONPath=`.status.impact.consumersOverLimit`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Enforced",type=integer,JSONPath=`.status.enforced.generation`,priority=1
// +kubebuilder:printcolumn:name="Trial",type=integer,JSONPath=`.status.trial.generation`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.trigger.resource.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.trigger.resource.apiVersion`
// +kubebuilder:selectablefield:JSONPath=`.spec.disabled`
type ClaimCreationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the policy.
	// +required
	Spec ClaimCreationPolicySpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the policy.
	// +optional
	Status ClaimCreationPolicyStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ClaimCreationPolicyList is a list of ClaimCreationPolicies.
// +kubebuilder:object:root=true
type ClaimCreationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []ClaimCreationPolicy `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// GrantTemplateBucket is a bucket of a grant template.
type GrantTemplateBucket struct {
	// amount is the quota granted.
	// +required
	// +kubebuilder:validation:Minimum=0
	Amount int64 `json:"amount" protobuf:"varint,1,opt,name=amount"`

	// AmountQuantity is amount as written when it was a quantity ("16Gi"),
	// until serve's admission converts it to base units; never stored or
	// served (see UnmarshalJSON).
	AmountQuantity string `json:"-" protobuf:"-"`

	// dimensions of the bucket; values may be templates.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=10
	Dimensions []TemplateDimension `json:"dimensions,omitempty" protobuf:"bytes,2,rep,name=dimensions"`
}

// GrantTemplateAllowance is an allowance of a grant template.
type GrantTemplateAllowance struct {
	// resourceType is a registered resource type.
	// +required
	ResourceType ResourceType `json:"resourceType" protobuf:"bytes,1,opt,name=resourceType,casttype=ResourceType"`

	// buckets are the amounts granted.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Buckets []GrantTemplateBucket `json:"buckets" protobuf:"bytes,2,rep,name=buckets"`
}

// ResourceGrantTemplateSpec is the spec of the grants a policy creates.
type ResourceGrantTemplateSpec struct {
	// consumerRef is the consumer receiving the quota.
	// +required
	ConsumerRef TemplateConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`

	// allowances are the quotas granted.
	// +required
	// +listType=map
	// +listMapKey=resourceType
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	Allowances []GrantTemplateAllowance `json:"allowances" protobuf:"bytes,2,rep,name=allowances"`

	// window, when set, gives every grant the policy writes a time window
	// measured from its trigger's metadata.creationTimestamp, never from
	// the current time, so that no reconcile moves a trial's end: a trial
	// of 30 days for each new organization is expiresAfter: 720h.
	// +optional
	Window *GrantTemplateWindow `json:"window,omitempty" protobuf:"bytes,3,opt,name=window"`
}

// GrantTemplateWindow is a grant's time window, relative to its trigger's
// creation.
// +kubebuilder:validation:XValidation:rule="has(self.startsAfter) || has(self.expiresAfter)",message="a window needs startsAfter, expiresAfter or both; remove window for a grant that always counts"
// +kubebuilder:validation:XValidation:rule="!has(self.startsAfter) || duration(self.startsAfter) >= duration('0s')",message="startsAfter must not be negative: a grant's start is at or after its trigger's creation",fieldPath=".startsAfter"
// +kubebuilder:validation:XValidation:rule="!has(self.expiresAfter) || duration(self.expiresAfter) > duration(has(self.startsAfter) ? self.startsAfter : '0s')",message="expiresAfter must be later than startsAfter (and than the trigger's creation): a window ends after it starts",fieldPath=".expiresAfter"
type GrantTemplateWindow struct {
	// startsAfter is how long after the trigger's creation the grant
	// starts to count (its spec.validFrom); absent: at once.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	StartsAfter *metav1.Duration `json:"startsAfter,omitempty" protobuf:"bytes,1,opt,name=startsAfter"`

	// expiresAfter is how long after the trigger's creation the grant
	// stops counting (its spec.expiresAt); absent: never.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	ExpiresAfter *metav1.Duration `json:"expiresAfter,omitempty" protobuf:"bytes,2,opt,name=expiresAfter"`
}

// ResourceGrantTemplate is the template of the grants a policy creates.
type ResourceGrantTemplate struct {
	// metadata of the rendered grant.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec of the rendered grant.
	// +required
	Spec ResourceGrantTemplateSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
}

// ParentContext says in which parent control plane a grant is created, for
// example the organization's control plane of a project.
type ParentContext struct {
	// apiGroup of the parent context kind.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`

	// kind of the parent context, for example Organization.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`

	// nameExpression is a {{ CEL }} template yielding the parent's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	NameExpression string `json:"nameExpression" protobuf:"bytes,3,opt,name=nameExpression"`
}

// GrantTarget is what a GrantCreationPolicy creates.
type GrantTarget struct {
	// resourceGrantTemplate is rendered into a ResourceGrant for each
	// matching object.
	// +required
	ResourceGrantTemplate ResourceGrantTemplate `json:"resourceGrantTemplate" protobuf:"bytes,1,opt,name=resourceGrantTemplate"`

	// parentContext, when set, creates the grant in the parent's context.
	// +optional
	ParentContext *ParentContext `json:"parentContext,omitempty" protobuf:"bytes,2,opt,name=parentContext"`
}

// GrantCreationPolicySpec says which grants exist for which objects.
type GrantCreationPolicySpec struct {
	// trigger selects the objects that receive grants.
	// +required
	Trigger Trigger `json:"trigger" protobuf:"bytes,1,opt,name=trigger"`

	// target is the grant each matching object receives.
	// +required
	Target GrantTarget `json:"target" protobuf:"bytes,2,opt,name=target"`

	// disabled turns the policy off without deleting it.
	// +optional
	// +kubebuilder:default=false
	Disabled bool `json:"disabled" protobuf:"varint,3,opt,name=disabled"`
}

// GrantCreationPolicy keeps a ResourceGrant for each object of a kind that
// matches its constraints: grants appear, change and disappear with them.
// +kubebuilder:object:root=true
// +genclient
// +genclient:nonNamespaced
// +kubebuilder:resource:scope=Cluster,shortName=gcp,categories=quotaplane
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.trigger.resource.kind`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.grantsSynced.status`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.grantsSynced.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:selectablefield:JSONPath=`.spec.trigger.resource.kind`
// +kubebuilder:selectablefield:JSONPath=`.spec.trigger.resource.apiVersion`
// +kubebuilder:selectablefield:JSONPath=`.spec.disabled`
type GrantCreationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the policy.
	// +required
	Spec GrantCreationPolicySpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the observed state of the policy.
	// +optional
	Status GrantCreationPolicyStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// GrantCreationPolicyStatus is the observed state of a GrantCreationPolicy:
// its one condition, Ready, as in the reference implementation, and beside
// it whether every grant it renders exists as rendered.
type GrantCreationPolicyStatus struct {
	PolicyStatus `json:",inline" protobuf:"bytes,1,opt,name=policyStatus"`

	// grantsSynced says whether every grant the Ready policy renders exists
	// as rendered; its reason names what holds a grant back
	// (docs/grant-policies.md). Kept out of conditions so that a client
	// comparing the conditions with the reference's sees the same list.
	// +optional
	GrantsSynced *metav1.Condition `json:"grantsSynced,omitempty" protobuf:"bytes,2,opt,name=grantsSynced"`
}

// GrantCreationPolicyList is a list of GrantCreationPolicies.
// +kubebuilder:object:root=true
type GrantCreationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []GrantCreationPolicy `json:"items" protobuf:"bytes,2,rep,name=items"`
}
