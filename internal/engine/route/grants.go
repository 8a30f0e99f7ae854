package route

import (
	"context"
	"slices"
	"sync"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// RequestGrants collects the grants admission made during one request, so
// that the server can report how that request ended: a stored object gets
// its claim at once, without looking it up; a create refused after admission
// (by a later admission step, or because the name was taken) is released at
// once.
type RequestGrants struct {
	mu sync.Mutex
	// entries are the pending entries this request made. A key alone
	// would not do: once an entry settles, another request's entry may
	// have the same key.
	entries []*formats.PendingClaim
	// budgets are delegated grants this request holds budget for.
	budgets []quota.Grant
	// session is the session under which this request asked the leading
	// replica (forwardedTo), "" when it asked none; remoteHeld, whether the
	// leader holds grants for it.
	session     string
	forwardedTo Forwarder
	remoteHeld  bool
}

type requestGrantsKey struct{}

// WithRequestGrants returns a context in which the Handle notes the grants of
// the request in the returned record.
func WithRequestGrants(ctx context.Context) (context.Context, *RequestGrants) {
	rec := &RequestGrants{}
	return context.WithValue(ctx, requestGrantsKey{}, rec), rec
}

// RecordOf is the record of ctx's request, nil when it has none.
func RecordOf(ctx context.Context) *RequestGrants {
	rec, _ := ctx.Value(requestGrantsKey{}).(*RequestGrants)
	return rec
}

// empty reports whether this request made no pending entry here and asked
// no leading replica.
func (rec *RequestGrants) empty() bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.entries) == 0 && rec.session == ""
}

// Empty reports whether the request was granted nothing: no policy charged
// its object (or it was a dry run).
func (rec *RequestGrants) Empty() bool {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.entries) == 0 && len(rec.budgets) == 0 && !rec.remoteHeld
}

// Has reports whether this request made the pending entry p.
func (rec *RequestGrants) Has(p *formats.PendingClaim) bool {
	if rec == nil {
		return false
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Contains(rec.entries, p)
}

// NoteGrants notes in ctx's record the pending entries a decision of its
// request made.
func NoteGrants(ctx context.Context, entries []*formats.PendingClaim) {
	rec := RecordOf(ctx)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, p := range entries {
		if !slices.Contains(rec.entries, p) { // a retry of the same request
			rec.entries = append(rec.entries, p)
		}
	}
}

// NoteBudget notes in ctx's record a delegated grant its request holds
// budget for.
func NoteBudget(ctx context.Context, g quota.Grant) {
	rec := RecordOf(ctx)
	if rec == nil {
		return
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.budgets = append(rec.budgets, g)
}

// CreateEnded reports how a request whose grants rec holds ended: status is
// its HTTP status, 0 when it ended without one (a panic).
func (h *Handle) CreateEnded(rec *RequestGrants, status int) {
	rec.mu.Lock()
	entries, budgets := rec.entries, rec.budgets
	session, fw := rec.session, rec.forwardedTo
	rec.mu.Unlock()
	if session != "" {
		fw.Ended(session, status)
	}
	if len(entries) == 0 && len(budgets) == 0 {
		return
	}
	d := h.termOf()
	if d == nil {
		return // the next leader looks the objects up
	}
	d.Ended(entries, budgets, status)
}
