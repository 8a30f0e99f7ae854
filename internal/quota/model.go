package quota

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Registration is what the engine needs of a ResourceRegistration.
type Registration struct {
	Name         string
	Created      time.Time
	ResourceType string
	ConsumerType GroupKind
	BaseUnit     string
	// DisplayUnit and UnitConversionFactor (base units in one display unit)
	// are how people read amounts; messages show both.
	DisplayUnit          string
	UnitConversionFactor int64
	// BaseUnitQuantity is one base unit as a Kubernetes quantity ("1Mi"),
	// empty when the registration declares none.
	BaseUnitQuantity string
	Claiming         []GroupKind
	// Levels are the consumer kinds above ConsumerType, nearest first, whose
	// grants also limit claims of this resource type: a claim of a Project
	// draws from its Organization's buckets too when Organization is listed.
	// Empty: one level, as before hierarchies.
	Levels []GroupKind
	// Deleting is set while the registration waits for deletion.
	Deleting bool
}

// Grant is what the engine needs of a ResourceGrant.
type Grant struct {
	UID        string
	Namespace  string
	Name       string
	Consumer   ConsumerID
	Allowances []Allowance
	// Group, when set, makes the grant a group's: its buckets cap the sum of
	// the usage of every consumer the group selects, and Consumer is the
	// group's own identity (GroupID).
	Group *Group
	// Budget, when set, is the consumer whose delegable budget the grant
	// draws from: a grant an organization's owners wrote for one of its
	// projects (see budget.go).
	Budget *ConsumerID
	// Generation is the grant's metadata.generation.
	Generation int64
	// Window is when the grant counts (spec.validFrom, spec.expiresAt);
	// Phase the phase the engine honours for it (window.go). A grant with
	// a bounded window contributes only in PhaseActive.
	Window Window
	Phase  Phase
}

// Counts says whether the grant counts towards its buckets now.
func (g Grant) Counts() bool { return g.Window.Counts(g.Phase) }

// Group selects consumers of one kind by their labels.
type Group struct {
	Kind GroupKind
	// Selector matches consumers' labels.
	Selector labels.Selector
}

// Allowance is the quota a grant gives for one resource type.
type Allowance struct {
	ResourceType string
	Buckets      []GrantBucket
}

// GrantBucket is an amount for one dimension set.
type GrantBucket struct {
	Amount int64
	Dims   Dimensions
}

// Claim is what the engine needs of a ResourceClaim.
type Claim struct {
	UID       string
	Namespace string
	Name      string
	Created   time.Time
	Consumer  ConsumerID
	Requests  []Request
	// ResourceRef is the kind of the object the claim is for, if named.
	ResourceRef *GroupKind
	// Cluster is the member cluster the object is stored in, "" when it is
	// stored in the quota plane itself (docs/clusters.md).
	Cluster string
}

// Request asks for an amount of one resource type.
type Request struct {
	ResourceType string
	Amount       int64
	Dims         Dimensions
}

// Outcome is the state of a claim.
type Outcome string

const (
	// Pending: not decided yet.
	Pending Outcome = "Pending"
	// Granted: every request is allocated.
	Granted Outcome = "Granted"
	// QuotaExceeded: denied as a whole because a request does not fit; the
	// claim waits and is decided again when its buckets gain room.
	QuotaExceeded Outcome = "QuotaExceeded"
	// ValidationFailed: denied because the claim does not match the
	// registrations; decided again when registrations change.
	ValidationFailed Outcome = "ValidationFailed"
)

// Request-level reasons.
const (
	ReasonQuotaAvailable   = "QuotaAvailable"
	ReasonQuotaExceeded    = "QuotaExceeded"
	ReasonValidationFailed = "ValidationFailed"
	// ReasonClaimDenied marks a request that would fit but is not allocated
	// because another request of the same claim was denied (all or nothing).
	ReasonClaimDenied = "ClaimDenied"
	ReasonPending     = "PendingEvaluation"
	// ReasonConsumerNotKnown marks a request of a consumer the engine does
	// not know (it does not exist, or was created a moment ago) while its
	// registration limits it at a level above: that level cannot be found
	// without the consumer, so nothing is allocated. The claim waits, and
	// is decided again when the consumer appears.
	ReasonConsumerNotKnown = "ConsumerNotKnown"
)

// RequestResult is the outcome of one request.
type RequestResult struct {
	ResourceType string
	Status       string // Granted, Denied or Pending
	Reason       string
	Message      string
	Allocated    int64
	// Bucket is the overall (dimensionless) bucket the amount is counted in.
	Bucket BucketID
	// Refused, for a request denied for quota, is the bucket that refused
	// it (at any level), and Levels the state of every level checked.
	Refused *BucketStatus
	Levels  []LevelStatus
}

// LevelStatus is how one level of a hierarchy stood when a request was
// checked against it.
type LevelStatus struct {
	// Consumer is the level: the claim's consumer, an ancestor, or a group.
	Consumer ConsumerID
	// Limited is false when the level has no grant: it does not limit.
	Limited bool
	// Bucket is the level's tightest bucket covering the request.
	Bucket BucketStatus
	// Refused marks the level whose limit refused the request.
	Refused bool
}

// Decision is the outcome of a claim with a message a person can act on.
type Decision struct {
	Outcome  Outcome
	Message  string
	Requests []RequestResult
}

// BucketStatus is the live state of one bucket.
type BucketStatus struct {
	ID   BucketID
	Dims Dimensions
	// Limit and Allocated are sums that saturate: between 0 and MaxInt64,
	// never wrapped.
	Limit     int64
	Allocated int64
	Claims    int32
	Grants    []GrantContribution
	// Unlimited: the bucket is at a level of a hierarchy where no grant
	// exists; it counts usage and limits nothing.
	Unlimited bool
	// Clusters is the part of Allocated held by objects in each member
	// cluster; nil when no member cluster holds any.
	Clusters map[string]int64
}

// WhereText says where a bucket's usage is, for a refusal: "; in use:
// 3 in cluster a, 2 in cluster b, 1 in the quota plane". Empty when no member
// cluster holds any.
func (b *BucketStatus) WhereText() string {
	if b == nil || len(b.Clusters) == 0 {
		return ""
	}
	names := make([]string, 0, len(b.Clusters))
	var members int64
	for n, v := range b.Clusters {
		names = append(names, n)
		members = AddSat(members, v)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%d in cluster %s", b.Clusters[n], n))
	}
	if own := b.Allocated - members; own > 0 {
		parts = append(parts, fmt.Sprintf("%d in the quota plane", own))
	}
	return "; in use: " + strings.Join(parts, ", ")
}

// Available is limit minus allocated, never below zero.
func (b BucketStatus) Available() int64 { return Room(b.Limit, b.Allocated) }

// OverLimit reports whether allocated exceeds limit (a limit was lowered).
func (b BucketStatus) OverLimit() bool { return !b.Unlimited && b.Allocated > b.Limit }

// UsedPercent is allocated as a whole percent of limit, rounded down (above
// 100 when over the limit, at most MaxInt32); ok is false when there is no
// finite, positive limit to be a percent of.
func (b BucketStatus) UsedPercent() (pct int32, ok bool) {
	if b.Unlimited || b.Limit <= 0 || b.Allocated < 0 {
		return 0, false
	}
	q, r := b.Allocated/b.Limit, b.Allocated%b.Limit
	if q > math.MaxInt32/100 {
		return math.MaxInt32, true
	}
	var p int64
	if b.Limit <= math.MaxInt64/100 {
		p = q*100 + r*100/b.Limit // exact: r*100 cannot overflow
	} else {
		p = q*100 + r/(b.Limit/100) // limits past 9e16: to within a percent
	}
	if p > math.MaxInt32 {
		return math.MaxInt32, true
	}
	return int32(p), true
}

// GrantContribution is what one grant adds to a bucket: the sum of its
// buckets with these dimensions, saturated at MaxInt64.
type GrantContribution struct {
	Namespace, Name string
	Amount          int64
	// Generation is the grant's metadata.generation the amount is from.
	Generation int64
	// ExpiresAt is when the grant stops counting (zero: never).
	ExpiresAt time.Time
}

// Validity is the outcome of validating a grant or a registration.
type Validity struct {
	Valid bool
	// Reason is the condition reason users and tools match on
	// (RegistrationActive, GrantActive, ValidationFailed, ...).
	Reason string
	// Cause is the precise cause (one of the Cause constants), kept out of
	// Reason so that tools written for the reference reasons work unchanged.
	Cause   string
	Message string
}

// Reasons of the Active condition of registrations and grants.
const (
	ReasonRegistrationActive  = "RegistrationActive"
	ReasonRegistrationPending = "RegistrationPending"
	ReasonGrantActive         = "GrantActive"
	ReasonGrantPending        = "GrantPending"
)

// Causes of an invalid registration or grant (Validity.Cause); the message
// says the same in words.
const (
	CauseNotFound                  = "NotFound"
	CauseDeleting                  = "Deleting"
	CauseDuplicateResourceType     = "DuplicateResourceType"
	CauseResourceTypeNotRegistered = "ResourceTypeNotRegistered"
	CauseConsumerTypeMismatch      = "ConsumerTypeMismatch"
	// CauseNamespaceNotAllowed: the grant's namespace may not name its
	// consumer (see GrantScope).
	CauseNamespaceNotAllowed = "NamespaceNotAllowed"
)

// BudgetResult is the outcome of a budget check.
type BudgetResult struct {
	OK bool
	// For a refusal: the resource type, what the grant asks beyond what it
	// gave before, what is left, the budget's limit and what is given.
	ResourceType       string
	Asked, Left, Limit int64
	Given              int64
	Message            string
}
