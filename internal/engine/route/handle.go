package route

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// DecideCreate decides the claims of one create together: all are granted or none.
// With dryRun nothing is recorded or allocated. Otherwise a grant is durable
// (in the journal) before DecideCreate returns, and the claims are written once the
// object is stored; a denial writes nothing: a refused create leaves no
// claim behind.
func (h *Handle) DecideCreate(ctx context.Context, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (AdmitResult, error) {
	res, err := h.decideCreate(ctx, claims, dryRun)
	if err == nil && res.Granted && !dryRun && ctx.Value(forwardedKey{}) == nil {
		h.waitAdmitted(claims)
	}
	return res, err
}

func (h *Handle) decideCreate(ctx context.Context, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (AdmitResult, error) {
	return route(ctx, h, func(d Decider) (AdmitResult, error) {
		if err := h.injected(); err != nil {
			return AdmitResult{}, err
		}
		if dryRun {
			return d.Evaluate(ctx, claims)
		}
		return d.Admit(ctx, claims)
	}, func(f Forwarder) (AdmitResult, error) {
		res, held, err := f.DecideCreate(ctx, sessionOf(ctx, f), claims, dryRun)
		noteRemote(ctx, held)
		return res, err
	})
}

// DecideUpdate decides the policies' changes for one update of obj together:
// all are granted, or none is and nothing is held. A change that grows needs
// room for its growth; one that shrinks or stops is granted at once and
// releases only once the update is stored. With dryRun nothing is kept.
// Admission of an update can run again in the same request (the storage
// retries on a conflict): the request's earlier decision is undone first.
func (h *Handle) DecideUpdate(ctx context.Context, obj ObjectRef, changes []PolicyChange, dryRun bool) (UpdateResult, error) {
	return route(ctx, h, func(d Decider) (UpdateResult, error) {
		return d.AdmitUpdate(ctx, obj, changes, dryRun)
	}, func(f Forwarder) (UpdateResult, error) {
		res, held, err := f.DecideUpdate(ctx, sessionOf(ctx, f), obj, changes, dryRun)
		noteRemote(ctx, held)
		return res, err
	})
}

// UndoEarlierAttempt undoes what an earlier run of admission decided for an
// update of obj in this same request: admission runs again when the storage
// retries on a conflict, and the newer object may need a different change, or
// none. It costs nothing when the request decided nothing for the object.
func (h *Handle) UndoEarlierAttempt(ctx context.Context, objectUID string) error {
	rec := RecordOf(ctx)
	if rec == nil || rec.empty() {
		return nil
	}
	d := h.leading()
	if d == nil {
		rec.mu.Lock()
		session, fw := rec.session, rec.forwardedTo
		rec.mu.Unlock()
		if session != "" && h.forwarder(ctx) != nil {
			if err := fw.UndoEarlierAttempt(ctx, session, objectUID); !errors.Is(err, ErrLeadsHere) {
				return err
			}
		}
		return nil // a new leader (this one, if it took the Lease) settles them by looking the object up
	}
	_, err := d.AdmitUpdate(ctx, ObjectRef{UID: objectUID}, nil, false)
	return err
}

// Review decides a review's steps in order, taking nothing.
func (h *Handle) Review(ctx context.Context, steps []ReviewStep) (ReviewResult, error) {
	return route(ctx, h, func(d Decider) (ReviewResult, error) {
		if err := h.injected(); err != nil {
			return ReviewResult{}, err
		}
		return d.Review(ctx, steps)
	}, func(f Forwarder) (ReviewResult, error) {
		return f.Review(ctx, steps)
	})
}

// DecideBudget decides, with the engine's other decisions, whether a grant an
// organization's owners write fits their organization's delegable budget.
// A grant that fits is held, in memory and in the journal, before DecideBudget
// returns. With dryRun nothing is held. docs/exactly-once.md "Quota at
// several levels" has the argument.
func (h *Handle) DecideBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error) {
	return route(ctx, h, func(d Decider) (quota.BudgetResult, error) {
		return d.DecideBudget(ctx, g, dryRun)
	}, func(f Forwarder) (quota.BudgetResult, error) {
		res, held, err := f.DecideBudget(ctx, sessionOf(ctx, f), g, dryRun)
		noteRemote(ctx, held)
		return res, err
	})
}

// Handle connects the engine to the API server it runs in: admission asks
// it for decisions, and it writes admission's grants and claims straight
// into that server's storage. The zero value is not leading and has no
// storage.
type Handle struct {
	term    atomic.Pointer[leader]
	storage atomic.Pointer[fence.Storage]
	forward atomic.Pointer[forwarding]
	// sessions are the requests other replicas forwarded here.
	sessions sessions
	// holdPeriod bounds a forwarded request's session (SetHoldPeriod).
	holdPeriod atomic.Int64
	// faults are the test harness's, nil in the shipped binary (HandleOptions).
	faults Faults
}

// Faults are faults a test harness injects into a Handle's decisions
// (internal/testserver's Options.Faults); the shipped binary sets none. A
// single replica's fail-open, or the window between admission and storage,
// cannot be reached otherwise: the first without breaking the etcd that also
// holds the fail-open record, the second is too short to act in. Their
// methods are called concurrently, on every decision.
type Faults interface {
	// Failure, when not nil, answers every decision of a create (and every
	// review) a leading engine is asked for, as when its journal cannot be
	// written.
	Failure() error
	// AdmittedDelay is how long a granted create of these claims waits after
	// its grant is recorded and before admission lets it go on to storage,
	// ignoring the request's deadline, as a slow admission step after
	// quotaplane's (the built-in ResourceQuota's, say) would; 0 for none.
	AdmittedDelay(claims []*quotav1alpha1.ResourceClaim) time.Duration
}

// HandleOptions configure a Handle when it is made; nothing changes them on
// a running Handle.
type HandleOptions struct {
	// Faults, when set, are consulted on every decision (tests only).
	Faults Faults
}

func (h *Handle) injected() error {
	if h.faults == nil {
		return nil
	}
	return h.faults.Failure()
}

// waitAdmitted holds a create of this replica's own that was granted for
// the delay the Handle's Faults ask for these claims, if any: the window
// between admission and storage, which tests widen.
func (h *Handle) waitAdmitted(claims []*quotav1alpha1.ResourceClaim) {
	if h.faults == nil {
		return
	}
	if d := h.faults.AdmittedDelay(claims); d > 0 {
		time.Sleep(d)
	}
}

// NewHandle returns a handle; pass it in the engine's Options.
func NewHandle() *Handle { return &Handle{} }

// NewHandleFor returns a handle configured by o.
func NewHandleFor(o HandleOptions) *Handle { return &Handle{faults: o.Faults} }

// UseStorage gives the engine the server's etcd. Without it the engine
// answers admission with ErrNotLeader (the create is refused as "retry").
func (h *Handle) UseStorage(s *Storage) { h.storage.Store(s) }

// Storage is the storage given to UseStorage, nil before.
func (h *Handle) Storage() *Storage { return h.storage.Load() }

// leader is the Decider of the term this replica leads.
type leader struct{ d Decider }

// Lead makes d the term admission uses, from now until Resign(d).
func (h *Handle) Lead(d Decider) { h.term.Store(&leader{d: d}) }

// Resign stops admission using t, unless another term replaced it.
func (h *Handle) Resign(d Decider) {
	if cur := h.term.Load(); cur != nil && cur.d == d {
		h.term.CompareAndSwap(cur, nil)
	}
}

// termOf is the Decider of the term this replica leads, nil when none
// (it may not be ready to record grants: leading).
func (h *Handle) termOf() Decider {
	if cur := h.term.Load(); cur != nil {
		return cur.d
	}
	return nil
}

// leading is the term admission may decide on, nil when there is none or it
// cannot record grants.
func (h *Handle) leading() Decider {
	d := h.termOf()
	if d == nil || !d.Ready() {
		return nil
	}
	return d
}

// RecordFailOpen writes the record of a create admitted fail-open. It is
// not fenced: any replica may admit fail-open, leader or not. It returns an
// error when there is no storage to write to.
func (h *Handle) RecordFailOpen(ctx context.Context, r FailOpenRecord) error {
	s := h.storage.Load()
	if s == nil {
		return fence.ErrNoStorage
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = s.Client.Put(ctx, formats.FailOpenKey(s.Prefix, r.UID), string(v))
	return err
}

// RecordRefusal records an admission refusal in the consumer's decision
// history, with its buckets' numbers, without waiting. It does nothing when
// this replica does not lead.
func (h *Handle) RecordRefusal(r Refusal) {
	if d := h.termOf(); d != nil {
		d.Refused(r)
		return
	}
	if fw := h.forward.Load(); fw != nil {
		fw.f.RecordRefusal(r)
	}
}

// RecordForwardedRefusal records a refusal another replica reported; it is
// never forwarded again.
func (h *Handle) RecordForwardedRefusal(r Refusal) {
	if d := h.termOf(); d != nil {
		d.Refused(r)
	}
}

// Decider is the engine of the term this replica leads: it decides on its
// own cache and records in its own journal (internal/engine/admit's Term).
// The Handle asks it when this replica leads, and the leader's Forwarder
// otherwise.
type Decider interface {
	// Ready reports whether it can record grants (its journal is open).
	Ready() bool
	// Evaluate decides a create's claims, keeping nothing (a dry run).
	Evaluate(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (AdmitResult, error)
	// Admit decides a create's claims together and holds a grant.
	Admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (AdmitResult, error)
	// AdmitUpdate decides an update's changes together.
	AdmitUpdate(ctx context.Context, obj ObjectRef, changes []PolicyChange, dryRun bool) (UpdateResult, error)
	// DecideBudget decides a delegated grant against its budget.
	DecideBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error)
	// Review decides a review's steps in order, taking nothing.
	Review(ctx context.Context, steps []ReviewStep) (ReviewResult, error)
	// Ended settles what a request was granted, given how it ended.
	Ended(entries []*formats.PendingClaim, budgets []quota.Grant, status int)
	// Refused records an admission refusal in the decision history.
	Refused(r Refusal)
}
