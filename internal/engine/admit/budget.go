package admit

import (
	"context"
	"errors"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/record"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// DecideBudget decides, with the engine's other decisions, whether a grant an
// organization's owners write fits their organization's delegable budget.
// A grant that fits is held, in memory and in the journal, before DecideBudget
// returns. With dryRun nothing is held. docs/exactly-once.md "Quota at
// several levels" has the argument.
func (h *Handle) DecideBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error) {
	return route(ctx, h, func(t *Term) (quota.BudgetResult, error) {
		return t.decideBudget(ctx, g, dryRun)
	}, func(f Forwarder) (quota.BudgetResult, error) {
		res, held, err := f.DecideBudget(ctx, sessionOf(ctx, f), g, dryRun)
		noteRemote(ctx, held)
		return res, err
	})
}

// decideBudget decides a delegated grant on this replica's engine.
func (t *Term) decideBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error) {
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
	hold := record.NewBudgetHold(qg)
	t.Cache.AddBudgetHoldLocked(hold)
	t.Cache.Unlock()
	t.BudgetMu.Lock()
	defer t.BudgetMu.Unlock()
	if err := t.Committer.Journal().RecordBudgetHold(ctx, hold); err != nil {
		// Not recorded: nothing is held, the grant is refused ("retry").
		t.Cache.DropBudgetHold(hold, qg)
		if errors.Is(err, fence.ErrDeposed) {
			return quota.BudgetResult{}, ErrNotLeader
		}
		return quota.BudgetResult{}, err
	}
	noteBudget(ctx, qg)
	return res, nil
}
