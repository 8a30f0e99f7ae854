package engine

import (
	"context"
	"sync"
	"time"
)

// CreateRecord collects the grants admission made during one create, so that
// the server can report how that create ended: a stored object gets its claim
// at once, without looking it up; a create refused after admission (by a
// later admission step, or because the name was taken) is released at once.
type CreateRecord struct {
	mu   sync.Mutex
	keys []string
}

type createRecordKey struct{}

// WithCreateRecord returns a context in which Admit notes its grants in rec.
func WithCreateRecord(ctx context.Context) (context.Context, *CreateRecord) {
	rec := &CreateRecord{}
	return context.WithValue(ctx, createRecordKey{}, rec), rec
}

// has reports whether this request made the pending entry k.
func (rec *CreateRecord) has(k string) bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, x := range rec.keys {
		if x == k {
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
		rec.keys = append(rec.keys, p.key())
	}
}

// CreateEnded reports how a create whose grants rec holds ended: status is
// its HTTP status, 0 when it ended without one (a panic).
func (h *Handle) CreateEnded(rec *CreateRecord, status int) {
	rec.mu.Lock()
	keys := rec.keys
	rec.mu.Unlock()
	if len(keys) == 0 {
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
	now := time.Now()
	t.mu.Lock()
	for _, k := range keys {
		if p, ok := t.pending[k]; ok {
			p.outcome, p.ended = out, now
		}
	}
	t.mu.Unlock()
	for _, k := range keys {
		t.materialize.Add(k)
	}
}
