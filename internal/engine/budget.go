package engine

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// AdmitBudget decides, with the engine's other decisions, whether a grant an
// organization's owners write fits their organization's delegable budget.
// A grant that fits is held against the budget until it is seen stored, or
// its request is reported refused (CreateEnded); concurrent grants therefore
// cannot together give more than the budget. With dryRun nothing is held.
func (h *Handle) AdmitBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error) {
	t := h.term.Load()
	if t == nil || t.journal == nil {
		return quota.BudgetResult{}, ErrNotLeader
	}
	qg := convert.Grant(g)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return quota.BudgetResult{}, ErrNotLeader
	}
	res := t.eng.CheckBudget(qg)
	if res.OK && !dryRun && qg.Budget != nil {
		t.eng.HoldBudget(qg)
		if rec, _ := ctx.Value(createRecordKey{}).(*CreateRecord); rec != nil {
			rec.mu.Lock()
			rec.budgets = append(rec.budgets, qg)
			rec.mu.Unlock()
		}
	}
	return res, nil
}

// budgetEnded settles the budget holds of a request that ended: a refused
// grant is released at once; one whose end is unclear is looked up.
func (t *term) budgetEnded(holds []quota.Grant, out outcome) {
	switch out {
	case outcomeStored:
		return // the grant informer settles the hold
	case outcomeRefused:
		t.mu.Lock()
		for _, g := range holds {
			t.eng.ReleaseBudgetHold(g)
		}
		t.mu.Unlock()
		return
	}
	go func() {
		// Unclear: the grant may still be stored. Look once the request
		// can no longer be writing it.
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(budgetLookupDelay):
		}
		for _, g := range holds {
			var got quotav1alpha1.ResourceGrant
			err := t.r.client.Get(t.ctx, clientKey(g.Namespace, g.Name), &got)
			if err != nil && !apierrors.IsNotFound(err) {
				klog.FromContext(t.ctx).Error(err, "Looking up a grant whose request ended unclearly; its budget stays held until the next leader", "grant", g.Namespace+"/"+g.Name)
				continue
			}
			t.mu.Lock()
			if apierrors.IsNotFound(err) || string(got.UID) != g.UID || got.Generation < g.Generation {
				t.eng.ReleaseBudgetHold(g)
			}
			t.mu.Unlock()
		}
		t.kickNow()
	}()
}

// budgetLookupDelay is how long after an unclear end a grant is looked up:
// longer than a request can still be writing.
const budgetLookupDelay = 70 * time.Second
