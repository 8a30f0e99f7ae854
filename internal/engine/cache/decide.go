package cache

import (
	"maps"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
)

// MaxInflight bounds the grants recorded in the ledger and not yet written
// to their claims (about 100 bytes each in the ledger).
const MaxInflight = 2000

// Decisions is what one round of deciding changed.
type Decisions struct {
	// Changed are the claims whose decision changed.
	Changed []accounting.Changed
	// Buckets, Grants and Registrations changed and are written again.
	Buckets       []quota.BucketID
	Grants        []string
	Registrations []string
	// RecordLedger: the ledger must be recorded before any of Changed is
	// written (new grants), or may be (only grants already written to
	// drop, when flush is set).
	RecordLedger bool
}

// Decide decides every waiting claim there is room to decide and returns
// what changed. New grants are added to the in-flight grants; at most
// MaxInflight are in flight, the rest wait for the writers (ClaimWritten).
// Grants already written leave the in-flight set here; with flush the
// ledger is recorded for them alone.
func (c *Cache) Decide(flush bool) Decisions {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Grants already written to their claims need not stay in the ledger;
	// the ledger's copy is a superset until the next record, which is safe.
	for uid := range c.projected {
		delete(c.inflight, uid)
		c.ledgerStale = true
	}
	c.projected = bookkeeping.Fresh(c.projected) // not the room of the most ever projected
	changed, more := c.acc.DecideUpTo(max(0, MaxInflight-len(c.inflight)))
	c.blocked = more
	out := Decisions{Changed: changed}
	out.Buckets, out.Grants, out.Registrations = c.acc.TakeChanged()
	now := time.Now()
	granted := 0
	for _, ch := range changed {
		if ch.Decision.Outcome == quota.Granted {
			c.inflight[ch.UID] = c.claimKeys[ch.UID]
			granted++
		}
		if seen, ok := c.firstSeen[ch.UID]; ok {
			result := "denied"
			if ch.Decision.Outcome == quota.Granted {
				result = "granted"
			}
			enginemetrics.DecisionLatency.WithLabelValues(result).Observe(now.Sub(seen).Seconds())
			delete(c.firstSeen, ch.UID)
		}
	}
	out.RecordLedger = granted > 0 || (flush && c.ledgerStale)
	enginemetrics.PendingClaims.Set(float64(c.acc.Waiting()))
	return out
}

// InflightRecord is what the next ledger record holds: the grants decided
// and not yet written to their claims.
func (c *Cache) InflightRecord() formats.LedgerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.projected {
		delete(c.inflight, uid)
	}
	c.projected = bookkeeping.Fresh(c.projected) // not the room of the most ever projected
	c.ledgerStale = false
	return formats.LedgerState{Inflight: maps.Clone(c.inflight), Windows: c.windowRecordsLocked()}
}

// ConsumerBucketIDs lists one consumer's buckets.
func (c *Cache) ConsumerBucketIDs(consumer quota.ConsumerID) []quota.BucketID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acc.ConsumerBucketIDs(consumer)
}

// BucketIDs lists every bucket the accounts have.
func (c *Cache) BucketIDs() []quota.BucketID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acc.BucketIDs()
}

// BucketNumbers are the accounts' numbers of consumer's overall buckets of
// resourceTypes, those that exist.
func (c *Cache) BucketNumbers(consumer quota.ConsumerID, resourceTypes []string) []quota.BucketStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []quota.BucketStatus
	for _, rt := range resourceTypes {
		if st, ok := c.acc.Bucket(quota.BucketID{Consumer: consumer, ResourceType: rt}); ok {
			out = append(out, st)
		}
	}
	return out
}

// RestoreBudgetHold restores a hold recorded by this or an earlier leader,
// before any grant is seen.
func (c *Cache) RestoreBudgetHold(r *formats.BudgetHold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acc.HoldBudget(r.Grant())
	c.budgetHolds[r.Key()] = r
}

// AddBudgetHoldLocked keeps the journal record of a hold just made.
func (c *Cache) AddBudgetHoldLocked(r *formats.BudgetHold) { c.budgetHolds[r.Key()] = r }

// DropBudgetHold undoes a hold whose journal record could not be written.
func (c *Cache) DropBudgetHold(r *formats.BudgetHold, g quota.Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acc.ReleaseBudgetHold(g)
	if c.budgetHolds[r.Key()] == r {
		delete(c.budgetHolds, r.Key())
	}
}

// ReleaseBudgetHolds releases the holds of grants that will not be stored.
func (c *Cache) ReleaseBudgetHolds(gs ...quota.Grant) {
	c.mu.Lock()
	for _, g := range gs {
		c.acc.ReleaseBudgetHold(g)
	}
	c.mu.Unlock()
	c.Notify()
}

// SettledBudgetHolds forgets, and returns, the journal records of holds the
// accounts no longer have (settled by the stored grant, or released).
func (c *Cache) SettledBudgetHolds() []*formats.BudgetHold {
	c.mu.Lock()
	defer c.mu.Unlock()
	var done []*formats.BudgetHold
	for k, r := range c.budgetHolds {
		if h, ok := c.acc.BudgetHold(k); !ok || h.UID != r.UID || h.Generation != r.Generation {
			done = append(done, r)
			delete(c.budgetHolds, k)
		}
	}
	return done
}
