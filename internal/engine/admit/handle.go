package admit

import (
	"sync"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Term is what admission uses while this replica leads.
type Term struct {
	// Cache is the state decisions are made on.
	Cache *cache.Cache
	// Committer records grants in the fenced journal.
	Committer *fence.Committer
	// Settle queues a pending entry, by key, for settling now (its request
	// ended); SettleLater after the recheck period (it has not yet).
	Settle, SettleLater func(key string)
	// BudgetEnded settles the budget holds of a request that ended.
	BudgetEnded func(holds []quota.Grant, out formats.Outcome)
	// BudgetMu serializes the journal writes of budget holds with their
	// settling, so that a settled hold's key is never deleted after a newer
	// hold of the same grant wrote it. Taken before the cache's lock.
	BudgetMu *sync.Mutex
	// RecordRefusal records an admission refusal in the decision history.
	RecordRefusal func(route.Refusal)
	// Now is the clock grant windows are judged by (the engine's); nil is
	// time.Now.
	Now func() time.Time
}

var _ route.Decider = &Term{}

// Ready reports whether t can record grants: its journal is open.
func (t *Term) Ready() bool { return t.Committer.HasJournal() }

// Refused records an admission refusal in the decision history.
func (t *Term) Refused(r route.Refusal) {
	if t.RecordRefusal != nil {
		t.RecordRefusal(r)
	}
}

// Ended settles what a request was granted here, given its HTTP status
// (0 when it ended without one: a panic): a stored object's claims are
// written at once, a refused one's grants released.
func (t *Term) Ended(entries []*formats.PendingClaim, budgets []quota.Grant, status int) {
	out := formats.OutcomeUnclear
	switch {
	case status >= 200 && status < 300:
		out = formats.OutcomeStored
	case status >= 400 && status < 500:
		// Admission, validation and the storage's name check all answer
		// before anything is written.
		out = formats.OutcomeRefused
	}
	if len(budgets) > 0 {
		t.BudgetEnded(budgets, out)
	}
	for _, k := range t.Cache.MarkEnded(entries, out, time.Now()) {
		t.Settle(k)
	}
}

// The engine's own objects in the system namespace, which admission guards.
const (
	// LedgerName is the ConfigMap that fences the engine's decisions.
	LedgerName = formats.LedgerName
	// SealSecretName is the Secret holding the key Granted decisions are
	// sealed with.
	SealSecretName = fence.SealSecretName
)
