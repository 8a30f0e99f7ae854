package peer

import (
	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
)

// CreatePath is where a follower asks for the decision on a create's claims.
const CreatePath = "/quotaplane/peer/v1/decide/create"

// CreateRequest is a create's claims, as the follower's admission rendered
// them (each carries its object's UID and its policy: the attempt's key).
type CreateRequest struct {
	Claims []*quotav1alpha1.ResourceClaim `json:"claims"`
	DryRun bool                           `json:"dryRun,omitempty"`
}

// CreateResponse is the leader's answer: its result, or the error its own
// admission would have got.
type CreateResponse struct {
	Result admit.AdmitResult `json:"result"`
	Error  *Error            `json:"error,omitempty"`
}

// Error kinds a leader answers with; the follower turns each back into the
// error its own engine would have returned.
const (
	ErrorNotLeader = "NotLeader"
	ErrorNameTaken = "NameTaken"
	ErrorBusy      = "Busy"
	ErrorOther     = "Other"
)

// Error is a decision that could not be made.
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Claim, Policy and By describe a NameTaken error.
	Claim  string `json:"claim,omitempty"`
	Policy string `json:"policy,omitempty"`
	By     string `json:"by,omitempty"`
}
