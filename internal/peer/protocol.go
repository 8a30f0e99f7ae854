package peer

import (
	"cmp"
	"slices"

	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/peer/wire"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// The peer listener's paths: what a follower asks the leading replica. The
// messages each carries are package wire's, in the version its header
// names (wire's doc has the format).
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

// toUpdateResult is route.UpdateResult as a message: what a change holds by
// cell is a list (JSON has no struct keys), in a stable order.
func toUpdateResult(r route.UpdateResult) *wire.UpdateResult {
	out := &wire.UpdateResult{Granted: r.Granted}
	for _, c := range r.Changes {
		w := wire.ChangeResult{Policy: c.Policy, Old: cells(c.Old), New: cells(c.New)}
		if c.Decision != nil {
			d := toDecision(*c.Decision)
			w.Decision = &d
		}
		out.Changes = append(out.Changes, w)
	}
	return out
}

func fromUpdateResult(r *wire.UpdateResult) route.UpdateResult {
	if r == nil {
		return route.UpdateResult{}
	}
	out := route.UpdateResult{Granted: r.Granted}
	for _, c := range r.Changes {
		a := route.ChangeResult{Policy: c.Policy, Old: byCell(c.Old), New: byCell(c.New)}
		if c.Decision != nil {
			d := fromDecision(*c.Decision)
			a.Decision = &d
		}
		out.Changes = append(out.Changes, a)
	}
	return out
}

func cells(m map[quota.Cell]int64) []wire.CellAmount {
	if m == nil {
		return nil
	}
	out := make([]wire.CellAmount, 0, len(m))
	for c, n := range m {
		out = append(out, wire.CellAmount{Cell: toCell(c), Amount: n})
	}
	slices.SortFunc(out, func(a, b wire.CellAmount) int {
		return cmp.Or(cmp.Compare(fromCell(a.Cell).Consumer.String(), fromCell(b.Cell).Consumer.String()),
			cmp.Compare(a.Cell.ResourceType, b.Cell.ResourceType), cmp.Compare(a.Cell.Dims, b.Cell.Dims))
	})
	return out
}

func byCell(l []wire.CellAmount) map[quota.Cell]int64 {
	if l == nil {
		return nil
	}
	out := make(map[quota.Cell]int64, len(l))
	for _, c := range l {
		out[fromCell(c.Cell)] = c.Amount
	}
	return out
}
