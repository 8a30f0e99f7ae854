package wire

import (
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// The API's own types (ResourceClaim, ResourceGrant, and the policy types an
// UpdateCheck carries) cross as they are: they are versioned by the API
// (quota.miloapis.com/v1alpha1) and decoded as any client of it would.

// CreateRequest asks for the decision on a create's claims, as the sender's
// admission rendered them (each carries its object's UID and its policy).
type CreateRequest struct {
	Session string                         `json:"session,omitempty"`
	Claims  []*quotav1alpha1.ResourceClaim `json:"claims"`
	DryRun  bool                           `json:"dryRun,omitempty"`
}

// UpdateRequest asks for the decision on an update's changes.
type UpdateRequest struct {
	Session string         `json:"session,omitempty"`
	Object  ObjectRef      `json:"object"`
	Changes []PolicyChange `json:"changes"`
	DryRun  bool           `json:"dryRun,omitempty"`
}

// BudgetRequest asks for the decision on a delegated grant's budget.
type BudgetRequest struct {
	Session string                       `json:"session,omitempty"`
	Grant   *quotav1alpha1.ResourceGrant `json:"grant"`
	DryRun  bool                         `json:"dryRun,omitempty"`
}

// ReviewRequest asks for the decision on a review's steps, taking nothing.
type ReviewRequest struct {
	Steps []ReviewStep `json:"steps"`
}

// UndoRequest undoes the session's earlier decision for an object.
type UndoRequest struct {
	Session   string `json:"session"`
	ObjectUID string `json:"objectUID"`
}

// EndedRequest says how a session's request ended: its HTTP status, 0 when
// unclear.
type EndedRequest struct {
	Session string `json:"session"`
	Status  int    `json:"status"`
}

// Refusal is an admission refusal for the leader's decision history.
type Refusal struct {
	Consumer ConsumerID `json:"Consumer"`
	Object   ObjectName `json:"Object"`
	Policy   string     `json:"Policy"`
	Requests []Amount   `json:"Requests"`
	Message  string     `json:"Message"`
}

// ObjectName names an object in the decision history.
type ObjectName struct {
	APIGroup  string `json:"apiGroup,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// Amount is an amount of one resource type.
type Amount struct {
	ResourceType string `json:"resourceType"`
	Amount       int64  `json:"amount"`
}

// ObjectRef is the object an update changes; Resource is
// resource.version.group of the object itself, Plane the control plane it
// is in ("projects/<name>"), "" at the root.
type ObjectRef struct {
	APIGroup  string `json:"APIGroup"`
	Kind      string `json:"Kind"`
	Resource  string `json:"Resource"`
	Namespace string `json:"Namespace"`
	Name      string `json:"Name"`
	UID       string `json:"UID"`
	Plane     string `json:"Plane"`
}

// PolicyChange is what one policy charges for an updated object: Claim is
// nil when the policy no longer applies to it.
type PolicyChange struct {
	Policy string                       `json:"Policy"`
	Claim  *quotav1alpha1.ResourceClaim `json:"Claim"`
	Check  UpdateCheck                  `json:"Check"`
}

// UpdateCheck is what a later leader needs to find out whether an update
// was stored.
type UpdateCheck struct {
	Generation  int64                     `json:"g"`
	Trigger     quotav1alpha1.Trigger     `json:"t"`
	Target      quotav1alpha1.ClaimTarget `json:"x"`
	User        map[string]any            `json:"u,omitempty"`
	RequestInfo map[string]any            `json:"r,omitempty"`
}

// ReviewStep is one step of a review: a create's claims, or an update's
// object and changes.
type ReviewStep struct {
	Claims  []*quotav1alpha1.ResourceClaim `json:"claims,omitempty"`
	Update  *ObjectRef                     `json:"update,omitempty"`
	Changes []PolicyChange                 `json:"changes,omitempty"`
}

// Response is the leader's answer: one of the results, or the error its own
// admission would have got; Held says whether it holds grants for the
// session after the call.
type Response struct {
	Create *CreateResult `json:"create,omitempty"`
	Update *UpdateResult `json:"update,omitempty"`
	Budget *BudgetResult `json:"budget,omitempty"`
	Review *ReviewResult `json:"review,omitempty"`
	Held   bool          `json:"held,omitempty"`
	Error  *Error        `json:"error,omitempty"`
}

// Error kinds: each is turned back into the error the leader's own
// admission got, except UnsupportedVersion, which is the receiver's.
const (
	ErrorNotLeader          = "NotLeader"
	ErrorNameTaken          = "NameTaken"
	ErrorBusy               = "Busy"
	ErrorObjectBusy         = "ObjectBusy"
	ErrorOther              = "Other"
	ErrorUnsupportedVersion = "UnsupportedVersion"
)

// Error is a decision that could not be made. Claim, Policy and By describe
// a NameTaken error.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	Claim   string `json:"claim,omitempty"`
	Policy  string `json:"policy,omitempty"`
	By      string `json:"by,omitempty"`
}

// CreateResult is the decision on a create: Decisions in the order of the
// claims asked for, and the claims as decided.
type CreateResult struct {
	Granted   bool       `json:"Granted"`
	Decisions []Decision `json:"Decisions"`
	Claims    []Claim    `json:"Claims"`
}

// UpdateResult is the decision on an update.
type UpdateResult struct {
	Granted bool           `json:"granted"`
	Changes []ChangeResult `json:"changes,omitempty"`
}

// ChangeResult is the outcome of one policy's change: what the object holds
// before and after, by cell, and the decision on its growth, if any.
type ChangeResult struct {
	Policy   string       `json:"policy"`
	Old      []CellAmount `json:"old,omitempty"`
	New      []CellAmount `json:"new,omitempty"`
	Decision *Decision    `json:"decision,omitempty"`
}

// CellAmount is an amount held in one cell.
type CellAmount struct {
	Cell   Cell  `json:"cell"`
	Amount int64 `json:"amount"`
}

// Cell is one consumer's resource type with a set of dimensions (their
// canonical text).
type Cell struct {
	Consumer     ConsumerID `json:"Consumer"`
	ResourceType string     `json:"ResourceType"`
	Dims         string     `json:"Dims"`
}

// BudgetResult is the decision on a delegated grant's budget.
type BudgetResult struct {
	OK           bool   `json:"OK"`
	ResourceType string `json:"ResourceType"`
	Asked        int64  `json:"Asked"`
	Left         int64  `json:"Left"`
	Limit        int64  `json:"Limit"`
	Given        int64  `json:"Given"`
	Message      string `json:"Message"`
}

// ReviewResult is the decision on a review's steps, and the overall buckets
// of every level drawn from, before and after the steps that fit.
type ReviewResult struct {
	Steps   []ReviewStepResult `json:"steps"`
	Buckets []WhatIfBucket     `json:"buckets"`
}

// ReviewStepResult is the decision on one step.
type ReviewStepResult struct {
	Granted   bool           `json:"granted"`
	Decisions []Decision     `json:"decisions,omitempty"`
	Policies  []string       `json:"policies,omitempty"`
	Charges   []ReviewCharge `json:"charges,omitempty"`
	NameTaken *NameTaken     `json:"nameTaken,omitempty"`
}

// ReviewCharge is one amount a step would hold: New after it, Held before.
type ReviewCharge struct {
	Policy string `json:"policy,omitempty"`
	Cell   Cell   `json:"cell"`
	New    int64  `json:"new"`
	Held   int64  `json:"held,omitempty"`
}

// NameTaken refuses a step: its claim's name (namespace/name, rendered by
// Policy) is taken By something else.
type NameTaken struct {
	Claim  string `json:"Claim"`
	Policy string `json:"Policy"`
	By     string `json:"By"`
}

// WhatIfBucket is an overall bucket before and after a review's steps.
type WhatIfBucket struct {
	Before BucketStatus `json:"Before"`
	After  BucketStatus `json:"After"`
}

// Decision is the outcome of a claim (Pending, Granted, QuotaExceeded or
// ValidationFailed) with a message a person can act on.
type Decision struct {
	Outcome  string          `json:"Outcome"`
	Message  string          `json:"Message"`
	Requests []RequestResult `json:"Requests"`
}

// RequestResult is the outcome of one request of a claim; Refused and
// Levels only for a request denied for quota.
type RequestResult struct {
	ResourceType string        `json:"ResourceType"`
	Status       string        `json:"Status"`
	Reason       string        `json:"Reason"`
	Message      string        `json:"Message"`
	Allocated    int64         `json:"Allocated"`
	Bucket       BucketID      `json:"Bucket"`
	Refused      *BucketStatus `json:"Refused"`
	Levels       []LevelStatus `json:"Levels"`
}

// LevelStatus is how one level of a hierarchy stood when a request was
// decided.
type LevelStatus struct {
	Consumer ConsumerID   `json:"Consumer"`
	Limited  bool         `json:"Limited"`
	Bucket   BucketStatus `json:"Bucket"`
	Refused  bool         `json:"Refused"`
}

// BucketID names a bucket: its consumer, resource type and dimensions (their
// canonical text).
type BucketID struct {
	Consumer     ConsumerID `json:"Consumer"`
	ResourceType string     `json:"ResourceType"`
	Dims         string     `json:"Dims"`
}

// BucketStatus is the state of one bucket.
type BucketStatus struct {
	ID        BucketID            `json:"ID"`
	Dims      []Dim               `json:"Dims"`
	Limit     int64               `json:"Limit"`
	Allocated int64               `json:"Allocated"`
	Claims    int32               `json:"Claims"`
	Grants    []GrantContribution `json:"Grants"`
	Unlimited bool                `json:"Unlimited"`
	Clusters  map[string]int64    `json:"Clusters"`
}

// Dim is one dimension's key and value.
type Dim struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// GrantContribution is what one grant gives a bucket.
type GrantContribution struct {
	Namespace  string    `json:"Namespace"`
	Name       string    `json:"Name"`
	Amount     int64     `json:"Amount"`
	Generation int64     `json:"Generation"`
	ExpiresAt  time.Time `json:"ExpiresAt"`
}

// Claim is a claim as the leader decided it.
type Claim struct {
	UID         string     `json:"UID"`
	Namespace   string     `json:"Namespace"`
	Name        string     `json:"Name"`
	Created     time.Time  `json:"Created"`
	Consumer    ConsumerID `json:"Consumer"`
	Requests    []Request  `json:"Requests"`
	ResourceRef *GroupKind `json:"ResourceRef"`
	Cluster     string     `json:"Cluster"`
}

// Request asks for an amount of one resource type.
type Request struct {
	ResourceType string `json:"ResourceType"`
	Amount       int64  `json:"Amount"`
	Dims         []Dim  `json:"Dims"`
}

// GroupKind is an API group and kind.
type GroupKind struct {
	Group string `json:"Group"`
	Kind  string `json:"Kind"`
}

// ConsumerID names a consumer.
type ConsumerID struct {
	APIGroup  string `json:"APIGroup"`
	Kind      string `json:"Kind"`
	Namespace string `json:"Namespace"`
	Name      string `json:"Name"`
}
