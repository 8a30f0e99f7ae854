package peer

import (
	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// The peer listener's paths: what a follower asks the leading replica.
const (
	prefix = "/quotaplane/peer/v1/"
	// CreatePath decides a create's claims.
	CreatePath = prefix + "decide/create"
	// UpdatePath decides an update's changes.
	UpdatePath = prefix + "decide/update"
	// BudgetPath decides a delegated grant's budget.
	BudgetPath = prefix + "decide/budget"
	// ReviewPath decides a QuotaReview's steps, taking nothing.
	ReviewPath = prefix + "review"
	// UndoPath undoes a session's earlier decision for an update that
	// admission runs again.
	UndoPath = prefix + "undo"
	// EndedPath reports how a session's request ended.
	EndedPath = prefix + "ended"
	// RefusalPath records a refusal in the decision history.
	RefusalPath = prefix + "refusal"
)

// CreateRequest is a create's claims, as the follower's admission rendered
// them (each carries its object's UID and its policy: the attempt's key).
type CreateRequest struct {
	Session string                         `json:"session,omitempty"`
	Claims  []*quotav1alpha1.ResourceClaim `json:"claims"`
	DryRun  bool                           `json:"dryRun,omitempty"`
}

// UpdateRequest is an update's changes, as the follower's admission
// rendered them.
type UpdateRequest struct {
	Session string               `json:"session,omitempty"`
	Object  admit.ObjectRef      `json:"object"`
	Changes []admit.PolicyChange `json:"changes"`
	DryRun  bool                 `json:"dryRun,omitempty"`
}

// BudgetRequest is a delegated grant whose budget is to be decided.
type BudgetRequest struct {
	Session string                       `json:"session,omitempty"`
	Grant   *quotav1alpha1.ResourceGrant `json:"grant"`
	DryRun  bool                         `json:"dryRun,omitempty"`
}

// ReviewRequest is a review's steps, as the follower's admission rendered
// them.
type ReviewRequest struct {
	Steps []admit.ReviewStep `json:"steps"`
}

// UndoRequest names the object whose earlier decision in the session is
// undone.
type UndoRequest struct {
	Session   string `json:"session"`
	ObjectUID string `json:"objectUID"`
}

// EndedRequest is how a session's request ended: its HTTP status, 0 when
// unclear.
type EndedRequest struct {
	Session string `json:"session"`
	Status  int    `json:"status"`
}

// Response is the leader's answer: one of the results, or the error its own
// admission would have got; Held says whether it holds grants for the
// session after the call.
type Response struct {
	Create *admit.AdmitResult  `json:"create,omitempty"`
	Update *updateResult       `json:"update,omitempty"`
	Budget *quota.BudgetResult `json:"budget,omitempty"`
	Review *admit.ReviewResult `json:"review,omitempty"`
	Held   bool                `json:"held,omitempty"`
	Error  *Error              `json:"error,omitempty"`
}

// Error kinds a leader answers with; the follower turns each back into the
// error its own engine would have returned.
const (
	ErrorNotLeader  = "NotLeader"
	ErrorNameTaken  = "NameTaken"
	ErrorBusy       = "Busy"
	ErrorObjectBusy = "ObjectBusy"
	ErrorOther      = "Other"
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

// updateResult is admit.UpdateResult on the wire: what a change holds by
// cell is a list, JSON having no struct keys.
type updateResult struct {
	Granted bool           `json:"granted"`
	Changes []changeResult `json:"changes,omitempty"`
}

type changeResult struct {
	Policy   string          `json:"policy"`
	Old      []cellAmount    `json:"old,omitempty"`
	New      []cellAmount    `json:"new,omitempty"`
	Decision *quota.Decision `json:"decision,omitempty"`
}

type cellAmount struct {
	Cell   quota.Cell `json:"cell"`
	Amount int64      `json:"amount"`
}

func wireUpdate(r admit.UpdateResult) *updateResult {
	out := &updateResult{Granted: r.Granted}
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, changeResult{Policy: c.Policy, Old: cells(c.Old), New: cells(c.New), Decision: c.Decision})
	}
	return out
}

func (r *updateResult) result() admit.UpdateResult {
	if r == nil {
		return admit.UpdateResult{}
	}
	out := admit.UpdateResult{Granted: r.Granted}
	for _, c := range r.Changes {
		out.Changes = append(out.Changes, admit.ChangeResult{Policy: c.Policy, Old: byCell(c.Old), New: byCell(c.New), Decision: c.Decision})
	}
	return out
}

func cells(m map[quota.Cell]int64) []cellAmount {
	if m == nil {
		return nil
	}
	out := make([]cellAmount, 0, len(m))
	for c, n := range m {
		out = append(out, cellAmount{Cell: c, Amount: n})
	}
	return out
}

func byCell(l []cellAmount) map[quota.Cell]int64 {
	if l == nil {
		return nil
	}
	out := make(map[quota.Cell]int64, len(l))
	for _, c := range l {
		out[c.Cell] = c.Amount
	}
	return out
}
