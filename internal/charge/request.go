package charge

import (
	"k8s.io/apiserver/pkg/admission"

	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// Mode is how far the steps go, and whose request they are.
type Mode int

const (
	// Admit charges a request's object: the engine decides and, unless
	// the request is a dry run, holds the grant until the object is
	// stored. Admission of creates and updates uses it.
	Admit Mode = iota
	// Review runs every step up to the decision and returns what the
	// engine would be asked (Step), asking nothing: a QuotaReview asks for
	// all its objects at once (Decide).
	Review
	// Existing charges an object a member cluster stores already
	// (docs/clusters.md): no requester is known, so no consumer is
	// authorized; everything else is as Admit.
	Existing
)

// Request is one object to charge: who asks, the object (old and new, in
// the attributes), where it is (the context: a control plane, a member
// cluster's review), and the mode.
type Request struct {
	Attributes admission.Attributes
	Objects    admission.ObjectInterfaces
	Mode       Mode
	// StoredElsewhere: the object is stored where this server cannot see
	// it (a member cluster). The record step settles a grant as stored at
	// once instead of when this server's request ends; the cluster's
	// webhook releases it should the object never appear (docs/clusters.md).
	StoredElsewhere bool
}

// Result is what the steps came to, besides the answer.
type Result struct {
	// Step is what Review mode would ask the engine; nil in other modes.
	Step *Step
	// Charged: a grant was recorded for the object (not in a dry run).
	Charged bool
}

// call is one Request while its steps run.
type call struct {
	Request
	// step is what Review mode returns; nil in the other modes.
	step *Step
}

// Step is what the engine would be asked for one object: empty (Asked
// false) when nothing charges it.
type Step struct {
	Asked bool
	Step  route.ReviewStep
	// Policies are the ClaimCreationPolicies charging it, by claim (a
	// create) or by change (an update); "" for a claim reviewed as itself.
	Policies []string
}

func names(applying []*inforce.Policy) []string {
	out := make([]string, len(applying))
	for i, f := range applying {
		out[i] = f.Name
	}
	return out
}
