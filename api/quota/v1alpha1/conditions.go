package v1alpha1

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
	// ClaimReasonPending: Granted=Unknown; not decided yet.
	ClaimReasonPending = "Pending"

	// GrantConditionActive is True when a grant counts towards its consumer's limits.
	GrantConditionActive = "Active"
	// RegistrationConditionActive is True when a registration is the one in
	// force for its resource type.
	RegistrationConditionActive = "Active"
	// BucketConditionOverLimit is True when allocated exceeds limit, for
	// example after a grant was lowered. Nothing is revoked.
	BucketConditionOverLimit = "OverLimit"
	// PolicyConditionReady is True when a policy is valid and in force.
	PolicyConditionReady = "Ready"
)
