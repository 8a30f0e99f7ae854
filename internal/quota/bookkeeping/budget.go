package bookkeeping

import (
	"fmt"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// Delegated budgets. An organization's limit for a resource type is also a
// budget its owners may split among its projects: the grants they write for
// their projects (Grant.Budget set) may together give at most that limit.
// Grants the platform writes, or GrantCreationPolicies make, are outside it.
// The check runs in the engine, serialized with every other decision, and a
// grant admitted but not yet seen stored is held (a budgetHold) so that
// concurrent grants cannot both take the last of a budget.

// budgetHold is a delegated grant admitted and not yet seen stored.
type budgetHold struct {
	grant quota.Grant
}

func grantKey(g quota.Grant) string { return g.Namespace + "/" + g.Name }

// delegated is what one allowance gives out of a budget: the sum of its
// buckets without dimensions (dimensioned buckets only narrow it).
func delegated(a quota.Allowance) int64 {
	var t quota.Total
	for _, b := range a.Buckets {
		if len(b.Dims) == 0 {
			t.Add(b.Amount)
		}
	}
	return t.Value()
}

// budgetUse is what the grant under one key gives of a resource type out of
// budget: the larger of the stored grant and one being admitted.
func (bk *Books) budgetUse(budget quota.ConsumerID, key, resourceType string, stored *quota.Grant) int64 {
	var out int64
	if stored != nil && stored.Budget != nil && *stored.Budget == budget {
		for _, a := range stored.Allowances {
			if a.ResourceType == resourceType {
				out = delegated(a)
			}
		}
	}
	if h, ok := bk.holds[key]; ok && h.grant.Budget != nil && *h.grant.Budget == budget {
		for _, a := range h.grant.Allowances {
			if a.ResourceType == resourceType {
				out = max(out, delegated(a))
			}
		}
	}
	return out
}

// CheckBudget decides whether a delegated grant fits its budget: for each
// resource type it gives more of than the grant under the same name did,
// the grants of the budget together must stay within the budget's limit.
// A grant that gives no more than before always fits (lowering is never
// refused, even over a lowered budget).
func (bk *Books) CheckBudget(g quota.Grant) quota.BudgetResult {
	if g.Budget == nil {
		return quota.BudgetResult{OK: true}
	}
	budget, key := *g.Budget, grantKey(g)
	stored := map[string]*quota.Grant{}
	for uid := range bk.grants {
		x := bk.grants[uid]
		stored[grantKey(x)] = &x
	}
	for _, a := range g.Allowances {
		asked := delegated(a)
		before := bk.budgetUse(budget, key, a.ResourceType, stored[key])
		if asked <= before {
			continue
		}
		var given quota.Total
		seen := map[string]bool{key: true}
		for k, x := range stored {
			seen[k] = true
			if k != key {
				given.Add(bk.budgetUse(budget, k, a.ResourceType, x))
			}
		}
		for k := range bk.holds {
			if !seen[k] {
				given.Add(bk.budgetUse(budget, k, a.ResourceType, nil))
			}
		}
		limit := int64(0)
		if s, ok := bk.series[Key{budget, a.ResourceType}]; ok {
			limit = s.Overall().Limit()
		}
		gave := given.Value()
		left := quota.Room(limit, gave)
		if asked <= left {
			continue
		}
		reg, _ := bk.ActiveRegistration(a.ResourceType)
		return quota.BudgetResult{ResourceType: a.ResourceType, Asked: asked, Left: left, Limit: limit, Given: gave,
			Message: fmt.Sprintf("ResourceGrant %s gives %s %s of %s out of %s's budget, but only %d of it is left to give "+
				"(the limit %d, of which %d is given to its projects by grants its owners wrote); lower the amount or another project's grant, "+
				"or ask the platform administrators, who manage %s's own ResourceGrant, to raise it",
				key, g.Consumer.LevelName(), reg.Amount(asked), a.ResourceType, budget.LevelName(), left, limit, gave, budget.LevelName())}
	}
	return quota.BudgetResult{OK: true}
}

// HoldBudget holds what an admitted delegated grant gives until the grant is
// seen stored (UpsertGrant of the same UID and generation) or released.
func (bk *Books) HoldBudget(g quota.Grant) {
	if g.Budget != nil {
		bk.holds[grantKey(g)] = budgetHold{grant: g}
	}
}

// ReleaseBudgetHold forgets a hold: the grant was not stored.
func (bk *Books) ReleaseBudgetHold(g quota.Grant) {
	if h, ok := bk.holds[grantKey(g)]; ok && h.grant.UID == g.UID && h.grant.Generation == g.Generation {
		delete(bk.holds, grantKey(g))
	}
}

// BudgetHolds counts holds, for tests and metrics.
func (bk *Books) BudgetHolds() int { return len(bk.holds) }

// settleHold forgets the hold a stored grant settles.
func (bk *Books) settleHold(g quota.Grant) {
	if h, ok := bk.holds[grantKey(g)]; ok && h.grant.UID == g.UID && g.Generation >= h.grant.Generation {
		delete(bk.holds, grantKey(g))
	}
}

// dropHoldOf forgets the hold of a deleted grant.
func (bk *Books) dropHoldOf(g quota.Grant) {
	if h, ok := bk.holds[grantKey(g)]; ok && h.grant.UID == g.UID {
		delete(bk.holds, grantKey(g))
	}
}

// BudgetHold returns the hold under a grant's namespace/name.
func (bk *Books) BudgetHold(key string) (quota.Grant, bool) {
	h, ok := bk.holds[key]
	return h.grant, ok
}
