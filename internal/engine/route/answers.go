package route

import (
	"errors"
	"fmt"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// NameTakenError refuses a create whose policy renders a claim name that is
// already used (by a stored claim, a claim being admitted, or another claim
// of the same create). Admitting it would store the object uncharged.
type NameTakenError struct {
	// Claim is namespace/name; Policy the ClaimCreationPolicy that rendered it.
	Claim, Policy string
	// By says what holds the name.
	By string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("ClaimCreationPolicy %s renders the claim name %s, which is taken by %s", e.Policy, e.Claim, e.By)
}

// ErrBusy means too many grants wait to be written; the caller should retry.
var ErrBusy = errors.New("the quota engine has too many grants waiting to be written")

// AdmitResult is the decision on the claims of one create.
type AdmitResult struct {
	Granted bool
	// Decisions, in the order of the claims asked for.
	Decisions []quota.Decision
	// Claims are the claims as decided (created ones carry their names).
	Claims []quota.Claim
}

// ObjectRef names the object an update changes.
type ObjectRef struct {
	APIGroup, Kind string
	// Resource is resource.version.group (quotav1alpha1.FormatResource) of
	// the object itself, also for an update through its scale subresource.
	Resource        string
	Namespace, Name string
	UID             string
	// Plane is the control plane the object is in ("projects/<name>"), ""
	// at the root: a later leader looks the object up there.
	Plane string
}

// UpdateCheck is what a later leader needs to find out whether an update was
// stored.
type UpdateCheck = formats.UpdateCheck

// PolicyChange is what one policy charges for an updated object.
type PolicyChange struct {
	Policy string
	// Claim is the claim the policy renders for the object as updated; nil
	// when the policy no longer applies to it.
	Claim *quotav1alpha1.ResourceClaim
	Check UpdateCheck
}

// ChangeResult is the outcome of one policy's change.
type ChangeResult struct {
	Policy string
	// Old and New are what the object holds before and after, by cell.
	Old, New map[quota.Cell]int64
	// Decision is the decision on the growth, when there is growth.
	Decision *quota.Decision
}

// UpdateResult is the decision on an update.
type UpdateResult struct {
	Granted bool
	Changes []ChangeResult
}

// ErrObjectBusy means another change of the same object is being decided
// and did not settle in time; the caller should retry.
var ErrObjectBusy = errors.New("another change of this object is still being charged")

// ReviewStep is one object of a review as admission rendered it: the claims
// its create would make, or the changes its update would.
type ReviewStep struct {
	Claims []*quotav1alpha1.ResourceClaim `json:"claims,omitempty"`
	// Update is the object an update changes, with Changes.
	Update  *ObjectRef     `json:"update,omitempty"`
	Changes []PolicyChange `json:"changes,omitempty"`
}

// ReviewCharge is one amount a step would hold: New after it, Held before
// (an update's).
type ReviewCharge struct {
	Policy string     `json:"policy,omitempty"`
	Cell   quota.Cell `json:"cell"`
	New    int64      `json:"new"`
	Held   int64      `json:"held,omitempty"`
}

// ReviewStepResult is the decision on one step.
type ReviewStepResult struct {
	Granted bool `json:"granted"`
	// Decisions are the decisions of the claims decided: a create's, in
	// claim order; an update's growth, in change order.
	Decisions []quota.Decision `json:"decisions,omitempty"`
	// Policies are the policy of each decision.
	Policies []string       `json:"policies,omitempty"`
	Charges  []ReviewCharge `json:"charges,omitempty"`
	// NameTaken refuses the step: its claim's name is taken.
	NameTaken *NameTakenError `json:"nameTaken,omitempty"`
}

// ReviewResult is the decision on a review.
type ReviewResult struct {
	Steps []ReviewStepResult `json:"steps"`
	// Buckets are the overall buckets of every level drawn from, before and
	// after the steps that fit.
	Buckets []accounting.WhatIfBucket `json:"buckets"`
}

// ErrNotLeader means this replica's engine is not deciding now (another
// replica leads, or leadership is changing); the caller should retry.
var ErrNotLeader = fence.ErrNotLeader

// Storage is direct access to the etcd of the API server the engine runs in.
type Storage = fence.Storage

// FailOpenRecord says that an object was admitted without its quota being
// decided (docs/admission.md); quotaplane verify lists these apart from damage.
type FailOpenRecord = formats.FailOpenRecord

// Refusal is a create refused at admission for quota: it leaves no claim, so
// admission reports it for the decision history.
type Refusal struct {
	// Consumer is the consumer whose quota did not suffice.
	Consumer quota.ConsumerID
	// Object is the object whose create was refused.
	Object history.ObjectRef
	// Policy is the ClaimCreationPolicy that charged it.
	Policy string
	// Requests are what the policy asked for.
	Requests []history.Amount
	// Message is the refusal the client received.
	Message string
}
