package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxReviewObjects is the most objects one QuotaReview may hold.
const MaxReviewObjects = 1000

// QuotaReviewResult is what applying one object of a review would do.
type QuotaReviewResult string

const (
	// ReviewFits: the object would be admitted, its quota taken.
	ReviewFits QuotaReviewResult = "Fits"
	// ReviewRefused: the object would be refused; reason and message say why.
	ReviewRefused QuotaReviewResult = "Refused"
	// ReviewNotCharged: the object would be admitted and no
	// ClaimCreationPolicy charges it (or, for an update, charges it
	// differently than now).
	ReviewNotCharged QuotaReviewResult = "NotCharged"
)

// Reasons of a refused object in a review.
const (
	// ReviewReasonQuotaExceeded: a limit at some level of the hierarchy
	// does not hold it, after the objects before it in the review.
	ReviewReasonQuotaExceeded = "QuotaExceeded"
	// ReviewReasonForbidden: the requester may not create (or patch) the
	// object, or may not charge its consumer.
	ReviewReasonForbidden = "Forbidden"
	// ReviewReasonInvalid: the object cannot be charged as written (a
	// policy cannot evaluate it, its claim is invalid).
	ReviewReasonInvalid = "Invalid"
	// ReviewReasonNameTaken: its claim's name is taken (by a stored claim,
	// or by an earlier object of the review).
	ReviewReasonNameTaken = "NameTaken"
	// ReviewReasonNotServed: the server does not serve its kind.
	ReviewReasonNotServed = "NotServed"
	// ReviewReasonDuplicate: an earlier object of the review is the same
	// object.
	ReviewReasonDuplicate = "Duplicate"
	// ReviewReasonNotYet: something it needs does not exist yet (a
	// Project's Organization, the Project it is charged to); applying it
	// is answered 429 or 503 with Retry-After, and succeeds once that
	// exists.
	ReviewReasonNotYet = "NotYet"
	// ReviewReasonDryRunUnsupported: a mutating admission webhook that
	// cannot be called as a dry run (sideEffects other than None) would
	// change the object; what it would change is not guessed.
	ReviewReasonDryRunUnsupported = "DryRunUnsupported"
)

// QuotaReview asks what applying a set of objects would take of quota, now,
// in order — all together, at every level of the hierarchy — and which would
// be refused first and why, taking nothing. Like a SelfSubjectAccessReview it
// is create-only and never stored: the answer is the created object's status.
// It is served by quotaplane serve, at the root and in every control plane
// (a plane's review evaluates in that plane). docs/what-if.md.
//
// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type QuotaReview struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is what to review.
	Spec QuotaReviewSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// status is the answer.
	// +optional
	Status QuotaReviewStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// QuotaReviewSpec is a set of objects to review.
type QuotaReviewSpec struct {
	// objects are the Kubernetes objects (or ResourceClaims) to review, in
	// the order they would be applied: each is decided after the ones
	// before it, as applying them one by one would be. An object that
	// exists is reviewed as the update applying it would be. At most 1,000.
	// Empty with policy.
	// +optional
	Objects []runtime.RawExtension `json:"objects" protobuf:"bytes,1,rep,name=objects"`

	// namespace is the namespace of the namespaced objects that name none,
	// as kubectl's --namespace. Empty means "default".
	// +optional
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,2,opt,name=namespace"`

	// user reviews for another user than the requester: what that user's
	// apply would get. The requester needs verb impersonate on users of
	// that name, and on groups of each of groups.
	// +optional
	User string `json:"user,omitempty" protobuf:"bytes,3,opt,name=user"`

	// groups are the groups of user.
	// +optional
	Groups []string `json:"groups,omitempty" protobuf:"bytes,4,rep,name=groups"`

	// policy, in place of objects, previews a ClaimCreationPolicy: it is
	// evaluated against every object of its trigger kind that exists, and
	// the answer (status.policyImpact) says, per consumer, what would be
	// allocated if it came into force, and which objects it would refuse or
	// cannot evaluate. It reads every tenant's usage, so the requester
	// needs the right to create ClaimCreationPolicies.
	// +optional
	Policy *PolicyPreview `json:"policy,omitempty" protobuf:"bytes,5,opt,name=policy"`
}

// PolicyPreview is a candidate ClaimCreationPolicy, new or an edit.
type PolicyPreview struct {
	// name is the policy's name. When a policy of that name exists, the
	// candidate is an edit of it: objects holding a claim of it are left
	// as they are, as when an edit comes into force.
	// +optional
	Name string `json:"name,omitempty" protobuf:"bytes,1,opt,name=name"`
	// spec is the candidate's spec; its mode is ignored (the preview is of
	// it enforcing).
	Spec ClaimCreationPolicySpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
}

// MaxPreviewObjects bounds the objects a policy preview names.
const MaxPreviewObjects = 100

// PolicyPreviewResult is the answer of a policy preview.
type PolicyPreviewResult struct {
	// summary counts what the policy would do, as a policy's status.impact
	// does (its lists bounded the same way).
	Summary PolicyImpact `json:"summary" protobuf:"bytes,1,opt,name=summary"`
	// consumers are every bucket the policy would charge, with what it
	// holds now and would hold once it came into force.
	// +optional
	Consumers []ConsumerImpact `json:"consumers,omitempty" protobuf:"bytes,2,rep,name=consumers"`
	// refused are objects that would not fit (at most 100): Kind
	// [namespace/]name and the bucket.
	// +optional
	Refused []string `json:"refused,omitempty" protobuf:"bytes,3,rep,name=refused"`
	// notCharged are objects it cannot evaluate or charge (at most 100),
	// each with why.
	// +optional
	NotCharged []string `json:"notCharged,omitempty" protobuf:"bytes,4,rep,name=notCharged"`
}

// QuotaReviewStatus is the answer of a review.
type QuotaReviewStatus struct {
	// fits is true when every object would be admitted.
	Fits bool `json:"fits" protobuf:"varint,1,opt,name=fits"`

	// user is who the review answered for.
	// +optional
	User string `json:"user,omitempty" protobuf:"bytes,2,opt,name=user"`

	// refused counts the objects that would be refused.
	Refused int32 `json:"refused" protobuf:"varint,3,opt,name=refused"`

	// message says, for a person, whether the set fits and, if not, which
	// object would be refused first and why.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,4,opt,name=message"`

	// objects are the answers for spec.objects, in the same order.
	// +optional
	Objects []QuotaReviewObject `json:"objects,omitempty" protobuf:"bytes,5,rep,name=objects"`

	// buckets are, for every consumer and level the set draws from (a
	// project and its organization, a group), what is allocated now and
	// what would be after the objects that fit.
	// +optional
	Buckets []QuotaReviewBucket `json:"buckets,omitempty" protobuf:"bytes,6,rep,name=buckets"`

	// notes say what the review did not simulate that applying would do.
	// +optional
	Notes []string `json:"notes,omitempty" protobuf:"bytes,7,rep,name=notes"`

	// policyImpact is the answer to spec.policy.
	// +optional
	PolicyImpact *PolicyPreviewResult `json:"policyImpact,omitempty" protobuf:"bytes,8,opt,name=policyImpact"`
}

// QuotaReviewObject is the answer for one object.
type QuotaReviewObject struct {
	// index is the object's position in spec.objects.
	Index int32 `json:"index" protobuf:"varint,1,opt,name=index"`
	// apiVersion, kind, namespace and name name the object.
	APIVersion string `json:"apiVersion,omitempty" protobuf:"bytes,2,opt,name=apiVersion"`
	Kind       string `json:"kind,omitempty" protobuf:"bytes,3,opt,name=kind"`
	// +optional
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,4,opt,name=namespace"`
	// +optional
	Name string `json:"name,omitempty" protobuf:"bytes,5,opt,name=name"`
	// operation is Create, or Update for an object that exists.
	Operation string `json:"operation,omitempty" protobuf:"bytes,6,opt,name=operation"`
	// result is Fits, Refused or NotCharged.
	Result QuotaReviewResult `json:"result" protobuf:"bytes,7,opt,name=result,casttype=QuotaReviewResult"`
	// reason, for a refused object: QuotaExceeded, Forbidden, Invalid,
	// NameTaken, NotServed or Duplicate.
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,8,opt,name=reason"`
	// message is the refusal applying it would get.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,9,opt,name=message"`
	// charges are what the policies would charge for it.
	// +optional
	Charges []QuotaReviewCharge `json:"charges,omitempty" protobuf:"bytes,10,rep,name=charges"`
}

// QuotaReviewCharge is one amount an object would be charged.
type QuotaReviewCharge struct {
	// policy is the ClaimCreationPolicy that charges it; empty for a
	// ResourceClaim in the review.
	// +optional
	Policy string `json:"policy,omitempty" protobuf:"bytes,1,opt,name=policy"`
	// consumerRef is who is charged.
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,2,opt,name=consumerRef"`
	// resourceType is what is charged.
	ResourceType string `json:"resourceType" protobuf:"bytes,3,opt,name=resourceType"`
	// amount is what the object would hold, in base units.
	Amount int64 `json:"amount" protobuf:"varint,4,opt,name=amount"`
	// held, for an update, is what the object holds now.
	// +optional
	Held int64 `json:"held,omitempty" protobuf:"varint,5,opt,name=held"`
}

// QuotaReviewBucket is one consumer's bucket of one resource type, at one
// level of the hierarchy the set draws from.
type QuotaReviewBucket struct {
	// consumerRef is the level: the consumer charged, an ancestor, or a
	// group.
	ConsumerRef ConsumerRef `json:"consumerRef" protobuf:"bytes,1,opt,name=consumerRef"`
	// resourceType is the bucket's resource type.
	ResourceType string `json:"resourceType" protobuf:"bytes,2,opt,name=resourceType"`
	// limit is the bucket's limit now; 0 with unlimited when no grant
	// exists at this level (it counts and limits nothing).
	Limit int64 `json:"limit" protobuf:"varint,3,opt,name=limit"`
	// +optional
	Unlimited bool `json:"unlimited,omitempty" protobuf:"varint,4,opt,name=unlimited"`
	// allocated is what is allocated now.
	Allocated int64 `json:"allocated" protobuf:"varint,5,opt,name=allocated"`
	// take is what the objects that fit would add (less what updates
	// that shrink would give back).
	Take int64 `json:"take" protobuf:"varint,6,opt,name=take"`
	// allocatedAfter is allocated once the objects that fit are applied.
	AllocatedAfter int64 `json:"allocatedAfter" protobuf:"varint,7,opt,name=allocatedAfter"`
	// refused is what the objects refused for quota at this bucket asked.
	// +optional
	Refused int64 `json:"refused,omitempty" protobuf:"varint,8,opt,name=refused"`
}
