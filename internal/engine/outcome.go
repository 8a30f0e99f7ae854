package engine

import (
	"context"
	"sync"
	"time"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// CreateRecord collects the grants admission made during one create, so that
// the server can report how that create ended: a stored object gets its claim
// at once, without looking it up; a create refused after admission (by a
// later admission step, or because the name was taken) is released at once.
type CreateRecord struct {
	mu sync.Mutex
	// entries are the pending entries this request made. A key alone
	// would not do: once an entry settles, another request's entry may
	// have the same key.
	entries []*pendingClaim
	// budgets are delegated grants this request holds budget for.
	budgets []quota.Grant
}

type createRecordKey struct{}

// WithCreateRecord returns a context in which Admit notes its grants in rec.
func WithCreateRecord(ctx context.Context) (context.Context, *CreateRecord) {
	rec := &CreateRecord{}
	return context.WithValue(ctx, createRecordKey{}, rec), rec
}

// empty reports whether this request made no pending entry.
func (rec *CreateRecord) empty() bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.entries) == 0
}

// has reports whether this request made the pending entry p.
func (rec *CreateRecord) has(p *pendingClaim) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, x := range rec.entries {
		if x == p {
			return true
		}
	}
	return false
}

func noteGrants(ctx context.Context, entries []*pendingClaim) {
	rec, _ := ctx.Value(createRecordKey{}).(*CreateRecord)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, p := range entries {
		rec.entries = append(rec.entries, p)
	}
}

// CreateEnded reports how a create whose grants rec holds ended: status is
// its HTTP status, 0 when it ended without one (a panic).
func (h *Handle) CreateEnded(rec *CreateRecord, status int) {
	rec.mu.Lock()
	entries, budgets := rec.entries, rec.budgets
	rec.mu.Unlock()
	if len(entries) == 0 && len(budgets) == 0 {
		return
	}
	t := h.term.Load()
	if t == nil {
		return // the next leader looks the objects up
	}
	out := outcomeUnclear
	switch {
	case status >= 200 && status < 300:
		out = outcomeStored
	case status >= 400 && status < 500:
		// Admission, validation and the storage's name check all answer
		// before anything is written.
		out = outcomeRefused
	}
	if len(budgets) > 0 {
		t.budgetEnded(budgets, out)
	}
	now := time.Now()
	var keys []string
	t.mu.Lock()
	for _, p := range entries {
		// Only an entry still pending as this request's: one released
		// when admission ran again, or settled, says nothing of others
		// that took its key since.
		if t.pending[p.key()] == p {
			p.outcome, p.ended = out, now
			keys = append(keys, p.key())
		}
	}
	t.mu.Unlock()
	for _, k := range keys {
		t.materialize.Add(k)
	}
}
