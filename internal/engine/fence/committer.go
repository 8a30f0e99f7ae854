package fence

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
)

// ErrNotLeader means this replica's engine is not deciding now (another
// replica leads, or leadership is changing); the caller should retry.
var ErrNotLeader = errors.New("the quota engine on this server is not the deciding replica right now")

// ErrNoStorage means the engine has no direct access to the server's
// storage: it cannot record admission's grants.
var ErrNoStorage = errors.New("this quota engine has no direct access to the server's storage")

// Result is the outcome of a write through the committer.
type Result struct {
	// Exists names the creates skipped because their claim existed.
	Exists map[string]error
	Err    error
}

type request struct {
	ops  *Ops // nil: a ledger record of the in-flight grants
	done chan Result
}

// Committer serves write requests one batch at a time: one journal write
// carries the operations of every request waiting, one ledger write every
// grant made before it (group commit). Both are fenced by the ledger's
// version, which only its Run goroutine changes.
type Committer struct {
	ledger  *Ledger
	journal *Journal // nil without direct storage
	// inflight snapshots the grants to record, under the cache's lock.
	inflight func() formats.LedgerState
	requests chan request
	// done is closed when Run exits: requests still waiting are answered
	// ErrNotLeader at once.
	done chan struct{}
}

// NewCommitter commits to l and j (j nil: ledger records only); inflight
// returns the grants a ledger record holds.
func NewCommitter(l *Ledger, j *Journal, inflight func() formats.LedgerState) *Committer {
	return &Committer{ledger: l, journal: j, inflight: inflight, requests: make(chan request, 4096), done: make(chan struct{})}
}

// HasJournal reports whether this committer can write admission's journal.
func (c *Committer) HasJournal() bool { return c.journal != nil }

// Journal is the journal the committer writes, nil without storage.
func (c *Committer) Journal() *Journal { return c.journal }

// RecordLedger records the in-flight grants in the ledger and returns once a
// record that includes every grant made before the call has been written.
func (c *Committer) RecordLedger(ctx context.Context) error {
	return c.request(ctx, nil).Err
}

// Write writes ops to the journal, batched with every other request
// waiting, and returns once they are durable.
func (c *Committer) Write(ctx context.Context, ops *Ops) Result {
	if c.journal == nil {
		return Result{Err: ErrNoStorage}
	}
	return c.request(ctx, ops)
}

func (c *Committer) request(ctx context.Context, ops *Ops) Result {
	r := request{ops: ops, done: make(chan Result, 1)}
	select {
	case c.requests <- r:
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-c.done:
		return Result{Err: ErrNotLeader}
	}
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		return Result{Err: ctx.Err()}
	case <-c.done:
		// The term ended before this request was served: nothing of it
		// was written (a batch being written is answered before the exit).
		select {
		case res := <-r.done:
			return res
		default:
			return Result{Err: ErrNotLeader}
		}
	}
}

// IsPermanent reports whether etcd refused a request as invalid (a
// duplicate key, too many operations, a value too large): retrying the same
// write cannot succeed.
func IsPermanent(err error) bool {
	if err == nil || errors.Is(err, ErrDeposed) {
		return false
	}
	// The etcd client turns the server's gRPC errors into its own type;
	// status.Code covers a raw gRPC status. Both look through wrapping.
	code := status.Code(err)
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	}
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted, codes.OutOfRange:
		return true
	}
	return false
}

// Run serves requests until ctx is done or a write fails for good; it then
// calls fail with the error (ErrDeposed when another leader stamped the
// ledger) and returns.
func (c *Committer) Run(ctx context.Context, fail func(error)) {
	defer close(c.done)
	for {
		var batch []request
		select {
		case <-ctx.Done():
			return
		case r := <-c.requests:
			batch = append(batch, r)
		}
	drain:
		for {
			select {
			case r := <-c.requests:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		ops := &Ops{}
		recordLedger := false
		for _, r := range batch {
			if r.ops == nil {
				recordLedger = true
			} else {
				ops.merge(r.ops)
			}
		}
		var recorded formats.LedgerState
		if recordLedger {
			recorded = c.inflight()
		}
		exists := map[string]error{}
		err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 2 * time.Second}, func(ctx context.Context) (bool, error) {
			var err error
			if !ops.empty() {
				err = c.journal.Write(ctx, ops, exists)
			}
			if err == nil && recordLedger {
				if err = c.ledger.Record(ctx, recorded); err == nil {
					recordLedger = false
				}
			}
			if errors.Is(err, ErrDeposed) || IsPermanent(err) {
				return false, err
			}
			if err != nil {
				klog.FromContext(ctx).Error(err, "Writing the ledger or journal failed; retrying")
				return false, nil
			}
			return true, nil
		})
		for _, r := range batch {
			r.done <- Result{Exists: exists, Err: err}
		}
		if IsPermanent(err) {
			// A write etcd refuses as such would be refused forever:
			// the requests of this batch are answered with it, and the
			// committer goes on with the next (no input may wedge it).
			klog.FromContext(ctx).Error(err, "The storage refused a journal write; its requests fail, nothing was written")
			continue
		}
		if err != nil {
			fail(err)
			return
		}
	}
}
