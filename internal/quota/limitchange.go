package quota

import (
	"fmt"
	"strings"
)

// RequestGrant is a grant an earlier approved quota request made for the
// same consumer, resource type and dimensions: a decrease may lower it.
type RequestGrant struct {
	Name   string
	Amount int64
	// Order sorts grants oldest first (their creation time, in any unit).
	Order int64
}

// LimitChange is how a quota request's approved limit is applied: a grant
// for the difference (an increase), or earlier requests' grants lowered (a
// decrease), or nothing (the limit is already there).
type LimitChange struct {
	// Target is the limit once applied.
	Target int64
	// Grant is the amount of the new grant; zero: none.
	Grant int64
	// Lowered are the earlier requests' grants a decrease changes, each
	// with its new amount (zero: the grant is deleted), newest first.
	Lowered []RequestGrant
}

// PlanLimitChange plans setting a consumer's limit from current to target,
// where allocated is in use and requestGrants are what earlier requests
// granted. An increase is a grant for the difference. A decrease below
// allocated is refused, saying by how much; otherwise it lowers the newest
// requests' grants first, and is refused when they do not hold enough of the
// limit (the rest is the platform's grants, which only staff change).
func PlanLimitChange(current, allocated, target int64, requestGrants []RequestGrant) (LimitChange, error) {
	switch {
	case target < 0:
		return LimitChange{}, fmt.Errorf("the limit asked for, %d, is negative", target)
	case target >= current:
		return LimitChange{Target: target, Grant: target - current}, nil
	case target < allocated:
		return LimitChange{}, fmt.Errorf("a limit of %d is below the %d allocated now, by %d: release %d first, or ask for at least %d",
			target, allocated, allocated-target, allocated-target, allocated)
	}
	need := current - target
	gs := append([]RequestGrant(nil), requestGrants...)
	// Newest first: the latest increase is the first given back.
	for i := 1; i < len(gs); i++ {
		for j := i; j > 0 && (gs[j].Order > gs[j-1].Order || gs[j].Order == gs[j-1].Order && gs[j].Name > gs[j-1].Name); j-- {
			gs[j], gs[j-1] = gs[j-1], gs[j]
		}
	}
	plan := LimitChange{Target: target}
	var held int64
	for _, g := range gs {
		if need == 0 {
			break
		}
		if g.Amount <= 0 {
			continue
		}
		take := min(g.Amount, need)
		need -= take
		held += g.Amount
		plan.Lowered = append(plan.Lowered, RequestGrant{Name: g.Name, Amount: g.Amount - take, Order: g.Order})
	}
	if need > 0 {
		var names []string
		for _, g := range gs {
			names = append(names, g.Name)
		}
		from := "no earlier request's grant"
		if len(names) > 0 {
			from = "earlier requests' grants (" + strings.Join(names, ", ") + ")"
		}
		return LimitChange{}, fmt.Errorf("a request can lower the limit from %d only to %d: %d of it comes from %s and the rest from the platform's grants, which staff change; ask for at least %d, or ask staff",
			current, current-held, held, from, current-held)
	}
	return plan, nil
}
