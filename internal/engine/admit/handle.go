package admit

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/record"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// ErrNotLeader means this replica's engine is not deciding now (another
// replica leads, or leadership is changing); the caller should retry.
var ErrNotLeader = fence.ErrNotLeader

// Storage is direct access to the etcd of the API server the engine runs in.
type Storage = fence.Storage

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
	BudgetEnded func(holds []quota.Grant, out record.Outcome)
	// BudgetMu serializes the journal writes of budget holds with their
	// settling, so that a settled hold's key is never deleted after a newer
	// hold of the same grant wrote it. Taken before the cache's lock.
	BudgetMu *sync.Mutex
	// RecordRefusal records an admission refusal in the decision history.
	RecordRefusal func(Refusal)
	// Now is the clock grant windows are judged by (the engine's); nil is
	// time.Now.
	Now func() time.Time
}

// Handle connects the engine to the API server it runs in: admission asks
// it for decisions, and it writes admission's grants and claims straight
// into that server's storage. The zero value is not leading and has no
// storage.
type Handle struct {
	term    atomic.Pointer[Term]
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

// WaitAdmitted holds a create that was granted for the delay the Handle's
// Faults ask for these claims, if any. Admission calls it last.
func (h *Handle) WaitAdmitted(claims []*quotav1alpha1.ResourceClaim) {
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

// Lead makes t the term admission uses, from now until Resign(t).
func (h *Handle) Lead(t *Term) { h.term.Store(t) }

// Resign stops admission using t, unless another term replaced it.
func (h *Handle) Resign(t *Term) { h.term.CompareAndSwap(t, nil) }

// leading is the term admission may decide on, nil when there is none or it
// cannot record grants.
func (h *Handle) leading() *Term {
	t := h.term.Load()
	if t == nil || !t.Committer.HasJournal() {
		return nil
	}
	return t
}

// FailOpenRecord says that an object was admitted without its quota being
// decided (docs/admission.md); quotaplane verify lists these apart from damage.
type FailOpenRecord = record.FailOpenRecord

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
	_, err = s.Client.Put(ctx, record.FailOpenKey(s.Prefix, r.UID), string(v))
	return err
}

// Refusal is a create refused at admission for quota: it leaves no claim, so
// admission reports it for the decision history.
type Refusal struct {
	// Consumer is the consumer whose quota did not suffice.
	Consumer quota.ConsumerID
	// Object is the object whose create was refused.
	Object history.ObjectRef
	// Policy is the ClaimCreationPolicy that charged it.
	Policy string
	// Requests are what the policy asked for.
	Requests []history.Amount
	// Message is the refusal the client received.
	Message string
}

// RecordRefusal records an admission refusal in the consumer's decision
// history, with its buckets' numbers, without waiting. It does nothing when
// this replica does not lead.
func (h *Handle) RecordRefusal(r Refusal) {
	if t := h.term.Load(); t != nil {
		if t.RecordRefusal != nil {
			t.RecordRefusal(r)
		}
		return
	}
	if fw := h.forward.Load(); fw != nil {
		fw.f.RecordRefusal(r)
	}
}

// RecordForwardedRefusal records a refusal another replica reported; it is
// never forwarded again.
func (h *Handle) RecordForwardedRefusal(r Refusal) {
	if t := h.term.Load(); t != nil && t.RecordRefusal != nil {
		t.RecordRefusal(r)
	}
}

// The engine's own objects in the system namespace, which admission guards.
const (
	// LedgerName is the ConfigMap that fences the engine's decisions.
	LedgerName = record.LedgerName
	// SealSecretName is the Secret holding the key Granted decisions are
	// sealed with.
	SealSecretName = fence.SealSecretName
)
