package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

const (
	// BudgetLabel marks a ResourceGrant an organization's owners wrote for
	// one of its projects: its value is the organization, whose delegable
	// budget the grant draws from. Admission sets it on every grant a
	// non-platform user writes in an organization's namespace; it cannot be
	// removed by them.
	BudgetLabel = "quota.miloapis.com/budget-of"

	// DefaultReservedLabelPrefix is the label prefix only the platform may
	// set on consumers (Organizations and Projects) and the only prefix
	// group grants select on.
	DefaultReservedLabelPrefix = "quota.miloapis.com/"
)

// Annotations on the ResourceClaims admission makes for an object.
const (
	// AnnotationResource is the claimed object's resource.version.group.
	AnnotationResource = "quota.miloapis.com/resource"
	// AnnotationResourceUID is the claimed object's UID.
	AnnotationResourceUID = "quota.miloapis.com/resource-uid"
	// AnnotationPolicy names the ClaimCreationPolicy that made the claim.
	AnnotationPolicy = "quota.miloapis.com/policy"
	// AnnotationPolicyGeneration is the generation of that policy which
	// computed the claim.
	AnnotationPolicyGeneration = "quota.miloapis.com/policy-generation"
	// AnnotationGrantKey is set on a claim written under another name than
	// the one admitted (the admitted name was taken meanwhile): it is the
	// namespace/name its grant was recorded under.
	AnnotationGrantKey = "quota.miloapis.com/admitted-as"
	// AnnotationChargeExisting, set on a ClaimCreationPolicy to any new
	// value, asks the engine to charge again every existing object the
	// policy governs that holds no claim of it (quotaplane verify --repair
	// sets it); status.existingObjects.request answers it.
	AnnotationChargeExisting = "quota.miloapis.com/charge-existing"
)

// Labels on every AllowanceBucket and decision-history ConfigMap, so that a
// tenant or a dashboard can select those of one consumer.
const (
	LabelConsumerKind = "quota.miloapis.com/consumer-kind"
	LabelConsumerName = "quota.miloapis.com/consumer-name"
	LabelResourceType = "quota.miloapis.com/resource-type"
	// LabelManagedBy is the recommended label; quotaplane sets it to
	// ManagedByQuotaplane on what it creates.
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	ManagedByQuotaplane = "quotaplane"
	// LabelPlaneNamespace is, on a ResourceClaim kept at the root for a
	// control plane, the plane's namespace it is shown in (the one its
	// template or its creator named); without it, the plane's system
	// namespace.
	LabelPlaneNamespace = "quota.miloapis.com/plane-namespace"
	// LabelProjectedFrom marks a group bucket's copy in a member's
	// namespace: its value is the namespace of the group's own bucket.
	LabelProjectedFrom = "quota.miloapis.com/projected-from"
	// LabelLegacyName is the name quotaplane gave a bucket before it took
	// the reference implementation's bucket-<sha256> names (shortened with
	// its hash when longer than a label value): -l finds it by that name.
	LabelLegacyName = "quota.miloapis.com/legacy-name"
)

// Labels and annotations the reference implementation's clients read on the
// ResourceClaims a ClaimCreationPolicy makes.
const (
	// LabelAutoCreated is "true" on every claim a policy made.
	LabelAutoCreated = "quota.miloapis.com/auto-created"
	// LabelCluster names the member cluster a claim's object is stored in
	// (quotaplane webhook, docs/clusters.md); absent for objects stored in
	// the quota plane itself.
	LabelCluster = "quota.miloapis.com/cluster"
	// LabelPolicy is the name of the policy that made the claim.
	LabelPolicy = "quota.miloapis.com/policy"
	// LabelGVK is the claimed object's <group>.<version>.<kind>, the group
	// "core" for the core group.
	LabelGVK = "quota.miloapis.com/gvk"
	// AnnotationCreatedBy names what made the claim: ClaimCreatedBy.
	AnnotationCreatedBy = "quota.miloapis.com/created-by"
	// ClaimCreatedBy is the reference implementation's value of
	// AnnotationCreatedBy, kept for its clients.
	ClaimCreatedBy = "claim-creation-plugin"
	// AnnotationCreator is the user who created a claim through the API,
	// written by the API server from the request (quotaplane serve's
	// ClaimCreator admission): a client cannot set or change it. Owning
	// services adopt only claims their own identity created
	// (pkg/quotaclaim).
	AnnotationCreator = "quota.miloapis.com/creator"
	// CheckWouldBeGranted starts the warning quotaplane serve answers a
	// dry-run create of a claim with when the engine would grant it now; a
	// claim that would not be granted is refused (403) starting with
	// CheckWouldNotBeGranted. Nothing is taken (pkg/quotaclaim's Check).
	CheckWouldBeGranted    = "quota check: this claim would be granted now"
	CheckWouldNotBeGranted = "quota check: this claim would not be granted now"
	// AnnotationResourceName is the claimed object's name.
	AnnotationResourceName = "quota.miloapis.com/resource-name"
)

// LabelValue is s when it is a valid label value, else its first characters
// and a hash of all of it (names run to 253 characters, label values to 63).
func LabelValue(s string) string {
	if len(s) <= 63 && labelValue.MatchString(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	prefix := labelUnsafe.ReplaceAllString(s, "_")
	if len(prefix) > 52 {
		prefix = prefix[:52]
	}
	return strings.Trim(prefix, "._-") + "-" + hex.EncodeToString(sum[:5])
}

var labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// ConsumerLabelValue is the value of LabelConsumerKind or LabelConsumerName
// for a consumer's kind or name: characters a label value cannot hold become
// "_", and it is cut to 63 characters (names are longer; labels select, the
// objects' specs say exactly whose they are).
func ConsumerLabelValue(s string) string {
	s = labelUnsafe.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "._-")
}
