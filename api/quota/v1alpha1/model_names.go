package v1alpha1

// The OpenAPI model names of the kinds, as the CRD server names them
// (reversed group, version, kind): serve publishes the same definitions
// natively (internal/server/nativeapi).

// OpenAPIModelName is the name of ResourceRegistration's OpenAPI definition.
func (ResourceRegistration) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.ResourceRegistration"
}

// OpenAPIModelName is the name of ResourceRegistrationList's OpenAPI definition.
func (ResourceRegistrationList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.ResourceRegistrationList"
}

// OpenAPIModelName is the name of ResourceGrant's OpenAPI definition.
func (ResourceGrant) OpenAPIModelName() string { return "com.miloapis.quota.v1alpha1.ResourceGrant" }

// OpenAPIModelName is the name of ResourceGrantList's OpenAPI definition.
func (ResourceGrantList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.ResourceGrantList"
}

// OpenAPIModelName is the name of ResourceClaim's OpenAPI definition.
func (ResourceClaim) OpenAPIModelName() string { return "com.miloapis.quota.v1alpha1.ResourceClaim" }

// OpenAPIModelName is the name of ResourceClaimList's OpenAPI definition.
func (ResourceClaimList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.ResourceClaimList"
}

// OpenAPIModelName is the name of AllowanceBucket's OpenAPI definition.
func (AllowanceBucket) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.AllowanceBucket"
}

// OpenAPIModelName is the name of AllowanceBucketList's OpenAPI definition.
func (AllowanceBucketList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.AllowanceBucketList"
}

// OpenAPIModelName is the name of ClaimCreationPolicy's OpenAPI definition.
func (ClaimCreationPolicy) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.ClaimCreationPolicy"
}

// OpenAPIModelName is the name of ClaimCreationPolicyList's OpenAPI definition.
func (ClaimCreationPolicyList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.ClaimCreationPolicyList"
}

// OpenAPIModelName is the name of GrantCreationPolicy's OpenAPI definition.
func (GrantCreationPolicy) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.GrantCreationPolicy"
}

// OpenAPIModelName is the name of GrantCreationPolicyList's OpenAPI definition.
func (GrantCreationPolicyList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.GrantCreationPolicyList"
}

// OpenAPIModelName is the name of QuotaRequest's OpenAPI definition.
func (QuotaRequest) OpenAPIModelName() string { return "com.miloapis.quota.v1alpha1.QuotaRequest" }

// OpenAPIModelName is the name of QuotaRequestList's OpenAPI definition.
func (QuotaRequestList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.QuotaRequestList"
}

// OpenAPIModelName is the name of QuotaApprovalRule's OpenAPI definition.
func (QuotaApprovalRule) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.QuotaApprovalRule"
}

// OpenAPIModelName is the name of QuotaApprovalRuleList's OpenAPI definition.
func (QuotaApprovalRuleList) OpenAPIModelName() string {
	return "com.miloapis.quota.v1alpha1.QuotaApprovalRuleList"
}

// OpenAPIModelName is the name of QuotaReview's OpenAPI definition.
func (QuotaReview) OpenAPIModelName() string { return "com.miloapis.quota.v1alpha1.QuotaReview" }
