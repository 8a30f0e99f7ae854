package formats

import (
	"time"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// BudgetHold is a delegated grant's hold on its organization's budget, as
// the journal keeps it until the grant is seen stored or refused.
type BudgetHold struct {
	UID        string            `json:"uid"`
	Generation int64             `json:"gen"`
	Namespace  string            `json:"ns"`
	Name       string            `json:"n"`
	Consumer   quota.ConsumerID  `json:"c"`
	Budget     quota.ConsumerID  `json:"b"`
	Allowances []quota.Allowance `json:"a"`
	Created    time.Time         `json:"t"`
}

// NewBudgetHold records the hold of g, which must draw from a budget.
func NewBudgetHold(g quota.Grant) *BudgetHold {
	return &BudgetHold{UID: g.UID, Generation: g.Generation, Namespace: g.Namespace, Name: g.Name,
		Consumer: g.Consumer, Budget: *g.Budget, Allowances: g.Allowances, Created: time.Now()}
}

// Grant is the held grant.
func (r *BudgetHold) Grant() quota.Grant {
	b := r.Budget
	return quota.Grant{UID: r.UID, Generation: r.Generation, Namespace: r.Namespace, Name: r.Name,
		Consumer: r.Consumer, Budget: &b, Allowances: r.Allowances}
}

// Key is the grant's namespace/name.
func (r *BudgetHold) Key() string { return Key(r.Namespace, r.Name) }
