package route

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Forwarder asks the replica whose engine leads for a decision this
// replica's engine cannot make because it does not lead (docs/replicas.md).
// It answers exactly what the leader's Handle answers its own admission:
// the same result, or the same errors (*NameTakenError, ErrBusy,
// ErrObjectBusy, ErrNotLeader when no leader can be reached).
//
// Every call of one request carries the request's session: the leader
// keeps, under it, the record of what the request was granted, as it does
// for its own requests, so that an update's retry finds its earlier
// decision and the request's end (Ended) settles its grants at once.
// Held reports whether the leader holds anything for the session after the
// call.
type Forwarder interface {
	DecideCreate(ctx context.Context, session string, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (res AdmitResult, held bool, err error)
	DecideUpdate(ctx context.Context, session string, obj ObjectRef, changes []PolicyChange, dryRun bool) (res UpdateResult, held bool, err error)
	UndoEarlierAttempt(ctx context.Context, session, objectUID string) error
	DecideBudget(ctx context.Context, session string, g *quotav1alpha1.ResourceGrant, dryRun bool) (res quota.BudgetResult, held bool, err error)
	// Review decides a review's steps, taking nothing (no session: it
	// holds nothing).
	Review(ctx context.Context, steps []ReviewStep) (ReviewResult, error)
	// Ended reports how the session's request ended (its HTTP status, 0
	// when unclear); it does not wait for the leader.
	Ended(session string, status int)
	// RecordRefusal records a refusal in the leader's decision history; it
	// does not wait.
	RecordRefusal(r Refusal)
}

// ErrLeadsHere is a Forwarder's answer when the engine's Lease names this
// very replica: it took the Lease while the call was forwarded (its leader
// paused or died). The call is decided here once this engine is ready.
var ErrLeadsHere = errors.New("this replica's engine holds the engine's Lease now")

// route decides on this replica's engine when it leads, and otherwise asks
// the leader through the forwarder. A forwarded call that finds this replica
// took the Lease meanwhile is routed again once its engine is ready, rather
// than asking on until the request's deadline.
func route[R any](ctx context.Context, h *Handle, local func(Decider) (R, error), remote func(Forwarder) (R, error)) (R, error) {
	var zero R
	for {
		if d := h.leading(); d != nil {
			return local(d)
		}
		f := h.forwarder(ctx)
		if f == nil {
			return zero, ErrNotLeader
		}
		res, err := remote(f)
		if !errors.Is(err, ErrLeadsHere) {
			return res, err
		}
		if err := h.awaitLeading(ctx, time.Second); err != nil {
			return zero, err
		}
	}
}

// awaitLeading waits up to d for this replica's engine to be ready to
// decide; ErrNotLeader when the request's context ends first.
func (h *Handle) awaitLeading(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for h.leading() == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: this replica took the engine's Lease, and its engine was not ready before the request's deadline", ErrNotLeader)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

type forwarding struct{ f Forwarder }

// ForwardTo makes the handle ask f while this replica does not lead; nil
// stops forwarding (creates are then refused as "retry").
func (h *Handle) ForwardTo(f Forwarder) {
	if f == nil {
		h.forward.Store(nil)
		return
	}
	h.forward.Store(&forwarding{f: f})
}

type forwardedKey struct{}

// forwarder is where a decision goes when this replica does not lead; nil
// when it must be refused instead: a decision forwarded here is decided by
// this replica's engine or refused, never forwarded again.
func (h *Handle) forwarder(ctx context.Context) Forwarder {
	if ctx.Value(forwardedKey{}) != nil {
		return nil
	}
	if fw := h.forward.Load(); fw != nil {
		return fw.f
	}
	return nil
}

// sessionOf is the session under which the request of ctx asks the leader,
// made on its first forwarded call; "" for a context without a record.
func sessionOf(ctx context.Context, fw Forwarder) string {
	rec := RecordOf(ctx)
	if rec == nil {
		return ""
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.session == "" {
		rec.session, rec.forwardedTo = string(uuid.NewUUID()), fw
	}
	return rec.session
}

// noteRemote notes that the leader holds grants for the request of ctx.
func noteRemote(ctx context.Context, held bool) {
	if rec := RecordOf(ctx); rec != nil && held {
		rec.mu.Lock()
		rec.remoteHeld = true
		rec.mu.Unlock()
	}
}

// SetHoldPeriod sets how long a leader keeps a forwarded request's record
// without hearing of its end: past the hold period the request can no
// longer store its object (docs/replicas.md), and the record's grants are
// settled by looking the objects up, as for a request whose end was
// unclear.
func (h *Handle) SetHoldPeriod(d time.Duration) { h.holdPeriod.Store(int64(d)) }

func (h *Handle) sessionTTL() time.Duration {
	if d := time.Duration(h.holdPeriod.Load()); d > 0 {
		return d
	}
	return 70 * time.Second
}

// sessions are the records of requests other replicas forwarded here.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

type session struct {
	rec     *RequestGrants
	started time.Time
}

// Session returns ctx for deciding a call another replica forwarded under
// session id: decided here or refused, never forwarded again, and noted in
// the session's record (made on its first call).
func (h *Handle) Session(ctx context.Context, id string) context.Context {
	ctx = context.WithValue(ctx, forwardedKey{}, true)
	if id == "" {
		return ctx
	}
	h.sessions.mu.Lock()
	defer h.sessions.mu.Unlock()
	if h.sessions.m == nil {
		h.sessions.m = map[string]*session{}
	}
	s, ok := h.sessions.m[id]
	if !ok {
		s = &session{rec: &RequestGrants{}, started: time.Now()}
		h.sessions.m[id] = s
	}
	return context.WithValue(ctx, requestGrantsKey{}, s.rec)
}

// Held reports whether ctx's record holds grants: what a forwarded call
// answers as held.
func Held(ctx context.Context) bool {
	rec := RecordOf(ctx)
	return rec != nil && !rec.Empty()
}

// SessionEnded settles what session id was granted, as CreateEnded does
// for this replica's own requests. An unknown session (a retry, or one
// this replica never decided for) is ignored: whoever holds its grants
// settles them by looking the objects up.
func (h *Handle) SessionEnded(id string, status int) {
	h.sessions.mu.Lock()
	s, ok := h.sessions.m[id]
	delete(h.sessions.m, id)
	h.sessions.mu.Unlock()
	if ok {
		h.CreateEnded(s.rec, status)
	}
}

// ExpireSessions ends, as unclear, the sessions older than the hold period: their
// requests can no longer store anything. It returns how many it ended.
func (h *Handle) ExpireSessions(now time.Time) int {
	h.sessions.mu.Lock()
	var old []*session
	for id, s := range h.sessions.m {
		if now.Sub(s.started) >= h.sessionTTL() {
			old = append(old, s)
			delete(h.sessions.m, id)
		}
	}
	h.sessions.mu.Unlock()
	for _, s := range old {
		h.CreateEnded(s.rec, 0)
	}
	return len(old)
}
