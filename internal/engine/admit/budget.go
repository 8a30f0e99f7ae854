package admit

import (
	"context"
	"errors"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// decideBudget decides a delegated grant on this replica's engine.
func (t *Term) DecideBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error) {
	qg := convert.Grant(g)
	if err := t.lockCurrent(ctx); err != nil {
		return quota.BudgetResult{}, err
	}
	acc := t.Cache.AccountsLocked()
	res := acc.CheckBudget(qg)
	if !res.OK || dryRun || qg.Budget == nil {
		t.Cache.Unlock()
		return res, nil
	}
	acc.HoldBudget(qg)
	hold := formats.NewBudgetHold(qg)
	t.Cache.AddBudgetHoldLocked(hold)
	t.Cache.Unlock()
	t.BudgetMu.Lock()
	defer t.BudgetMu.Unlock()
	if err := t.Committer.Journal().RecordBudgetHold(ctx, hold); err != nil {
		// Not recorded: nothing is held, the grant is refused ("retry").
		t.Cache.DropBudgetHold(hold, qg)
		if errors.Is(err, fence.ErrDeposed) {
			return quota.BudgetResult{}, route.ErrNotLeader
		}
		return quota.BudgetResult{}, err
	}
	route.NoteBudget(ctx, qg)
	return res, nil
}
