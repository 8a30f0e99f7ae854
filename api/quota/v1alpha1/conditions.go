package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Condition types and reasons of the quota kinds. docs/conditions.md says
// what each means and what to do about it.
const (
	// ClaimConditionGranted is True when every request of a claim is allocated.
	ClaimConditionGranted = "Granted"
	// ClaimReasonQuotaAvailable: Granted=True; all requests are allocated.
	ClaimReasonQuotaAvailable = "QuotaAvailable"
	// ClaimReasonQuotaExceeded: Granted=False; a request does not fit. The
	// claim holds nothing and is decided again, in creation order, when its
	// buckets gain room.
	ClaimReasonQuotaExceeded = "QuotaExceeded"
	// ClaimReasonValidationFailed: Granted=False; the claim does not match the
	// registrations (unregistered type, consumer type mismatch, resourceRef
	// kind not allowed, duplicate resource type).
	ClaimReasonValidationFailed = "ValidationFailed"
	// ClaimReasonPendingEvaluation: Granted=False; not decided yet. A new
	// claim starts so (the CRD's default), as in the reference
	// implementation; ClaimDecision tells it from a refusal.
	ClaimReasonPendingEvaluation = "PendingEvaluation"

	// GrantConditionActive is True when a grant counts towards its consumer's limits.
	GrantConditionActive = "Active"
	// GrantReasonActive: Active=True; the grant counts towards its
	// consumer's limits.
	GrantReasonActive = "GrantActive"
	// GrantReasonPending: Active=Unknown; not judged yet.
	GrantReasonPending = "GrantPending"
	// GrantReasonValidationFailed: Active=False; an allowance names an
	// unregistered resource type or a consumer of another type, or a
	// resource type twice. The message says which.
	GrantReasonValidationFailed = "ValidationFailed"
	// GrantReasonNotYetValid: Active=False; the grant's spec.validFrom has
	// not come yet. The message says when it starts to count.
	GrantReasonNotYetValid = "NotYetValid"
	// GrantReasonExpired: Active=False; the grant's spec.expiresAt has
	// passed. Nothing it allowed was revoked.
	GrantReasonExpired = "Expired"
	// GrantConditionExpiringSoon is True on a counting grant whose
	// spec.expiresAt is within the engine's warning lead time
	// (--grant-expiry-warning, 72h by default); False before that, and
	// after the expiry. Only grants with spec.expiresAt have it.
	GrantConditionExpiringSoon = "ExpiringSoon"
	// GrantReasonExpiringSoon: ExpiringSoon=True; the message says when.
	GrantReasonExpiringSoon = "ExpiringSoon"
	// GrantReasonExpiresLater: ExpiringSoon=False; the expiry is further
	// away than the warning lead time, or the grant does not count now.
	GrantReasonExpiresLater = "ExpiresLater"
	// GrantConditionConsumerFound was a condition on every grant naming an
	// Organization, Project or Namespace. A grant's conditions are the
	// reference implementation's again (Active, and ExpiringSoon on grants
	// with spec.expiresAt): whether the consumer exists is
	// status.consumerState, and a missing consumer is named in a Warning
	// Event (GrantReasonConsumerNotFound). The engine removes this condition
	// where an earlier version wrote it.
	//
	// Deprecated: read status.consumerState (GrantConsumerFound,
	// GrantConsumerMissing).
	GrantConditionConsumerFound = "ConsumerFound"
	// GrantReasonConsumerFound was ConsumerFound=True.
	//
	// Deprecated: read status.consumerState.
	GrantReasonConsumerFound = "ConsumerFound"
	// GrantReasonConsumerNotFound is the reason of the Warning Event
	// recorded on a grant when its consumer is found missing; the message
	// names the consumer and, to the platform, the nearest existing name.
	GrantReasonConsumerNotFound = "ConsumerNotFound"
	// RegistrationConditionActive is True when a registration is the one in
	// force for its resource type.
	RegistrationConditionActive = "Active"
	// RegistrationReasonActive: Active=True; the registration in force.
	RegistrationReasonActive = "RegistrationActive"
	// RegistrationReasonPending: Active=False; not in force and nothing to
	// fix: being deleted (the message counts its remaining users).
	RegistrationReasonPending = "RegistrationPending"
	// RegistrationReasonValidationFailed: Active=False; another, older
	// registration holds the resource type.
	RegistrationReasonValidationFailed = "ValidationFailed"
	// BucketConditionOverLimit is True when allocated exceeds limit, for
	// example after a grant was lowered. Nothing is revoked.
	BucketConditionOverLimit = "OverLimit"
	// BucketConditionExpiringSoon is True when a grant counting towards
	// the bucket expires within the engine's warning lead time; the message
	// names the grants and the limit after they expire.
	BucketConditionExpiringSoon = "ExpiringSoon"
	// BucketReasonGrantsExpiringSoon: ExpiringSoon=True.
	BucketReasonGrantsExpiringSoon = "GrantsExpiringSoon"
	// BucketReasonNoGrantExpiringSoon: ExpiringSoon=False.
	BucketReasonNoGrantExpiringSoon = "NoGrantExpiringSoon"
	// BucketConditionApproachingLimit is True when a bucket's allocation
	// reached a threshold of its registration (default 80 and 95 % of the
	// limit); it goes back to False 5 points under the threshold.
	BucketConditionApproachingLimit = "ApproachingLimit"
	// BucketReasonBelowThresholds: ApproachingLimit=False.
	BucketReasonBelowThresholds = "BelowThresholds"
	// BucketReasonWarningThreshold: ApproachingLimit=True; at or over the
	// warning threshold.
	BucketReasonWarningThreshold = "WarningThresholdReached"
	// BucketReasonCriticalThreshold: ApproachingLimit=True; at or over the
	// critical threshold.
	BucketReasonCriticalThreshold = "CriticalThresholdReached"
	// PolicyConditionReady is True when a policy is valid and in force.
	PolicyConditionReady = "Ready"
	// PolicyConditionTypeChecked is present only when checking a policy
	// against its trigger kind's schema found something (status.typeChecking
	// lists it): False, reason TypeCheckWarnings, the findings in the
	// message. The policy stays Ready; a policy with nothing found has the
	// reference's conditions alone.
	PolicyConditionTypeChecked = "TypeChecked"
	// PolicyReasonTypeCheckWarnings: TypeChecked=False.
	PolicyReasonTypeCheckWarnings = "TypeCheckWarnings"

	// GrantPolicyConditionGrantsSynced says whether every grant a Ready policy renders
	// exists as rendered. Its reasons name what holds a grant back.
	GrantPolicyConditionGrantsSynced = "GrantsSynced"

	// GrantPolicyReasonGrantsSynced (True): no grant of the policy is held back.
	GrantPolicyReasonGrantsSynced = "GrantsSynced"
	// GrantPolicyConditionParentContextReady: on a policy with
	// spec.target.parentContext, whether every grant's parent is resolved.
	GrantPolicyConditionParentContextReady = "ParentContextReady"
	// GrantPolicyReasonParentContextResolved (True): every parent is found.
	GrantPolicyReasonParentContextResolved = "ParentContextResolved"
	// GrantPolicyReasonParentContextNotFound (False): a trigger's parent
	// context does not exist or is not Ready; its grant is written nowhere
	// and retried.
	GrantPolicyReasonParentContextNotFound = "ParentContextNotFound"
	// GrantPolicyReasonWaitingForNamespace (False): a grant's target namespace does
	// not exist yet; it is made there once it does, never elsewhere.
	GrantPolicyReasonWaitingForNamespace = "WaitingForNamespace"
	// GrantPolicyReasonNameCollision (False): a grant's rendered name is held by a
	// grant this policy did not make for that object; it is not touched.
	GrantPolicyReasonNameCollision = "NameCollision"
	// GrantPolicyReasonRenderFailed (False): a constraint or the template failed on
	// an object (for example a field it reads is missing); the object's
	// grants are left as they are.
	GrantPolicyReasonRenderFailed = "RenderFailed"
	// GrantPolicyReasonNotReconciling (False): the policy is not Ready; the grants
	// it made are kept, and none is made, changed or removed.
	GrantPolicyReasonNotReconciling = "NotReconciling"
)

// ClaimDecision returns the Granted condition of a decided claim, nil while
// it is undecided (no condition, Unknown, or PendingEvaluation).
func ClaimDecision(conds []metav1.Condition) *metav1.Condition {
	for i := range conds {
		c := &conds[i]
		if c.Type != ClaimConditionGranted {
			continue
		}
		if c.Status == metav1.ConditionUnknown || c.Reason == ClaimReasonPendingEvaluation {
			return nil
		}
		return c
	}
	return nil
}
