package engine

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// term is one term of leadership. Its engine and queues live and die with it.
type term struct {
	r       *Runner
	ledger  *ledger
	journal *journal // nil without direct storage: no admission

	mu sync.Mutex
	// eng is the state; guarded by mu.
	eng       *quota.Engine
	ready     bool
	claimKeys map[string]string // claim UID → namespace/name
	grantKeys map[string]string // grant UID → namespace/name
	// inflight are the grants recorded in the ledger; projected are those
	// since written to their claims, dropped from the ledger next time.
	inflight  map[string]string
	projected map[string]struct{}
	// ledgerStale: the ledger lists grants already written (trimmed at the
	// next record). blocked: the in-flight bound held decisions back.
	ledgerStale bool
	blocked     bool
	firstSeen   map[string]time.Time

	kick chan struct{}
	// commits are requests to record the in-flight grants in the ledger;
	// one write serves every request waiting (group commit).
	commits chan commitReq
	// committerDone is closed when the committer exits: requests still
	// waiting are answered ErrNotLeader at once.
	committerDone chan struct{}
	// stopped is set when the term ends; admission then stops using it.
	stopped bool
	// pending are grants made at admission whose claims are not created
	// yet, by claim namespace/name; each is held in the engine under a
	// provisional ID until its claim exists.
	pending map[string]*pendingClaim
	// pendingByObject are the keys of pending, by object UID.
	pendingByObject map[string]map[string]struct{}
	// updating marks an object whose update is being decided, with a token
	// of that decision (updateSeq).
	updating  map[string]uint64
	updateSeq uint64
	// objectClaims are the claims policies made, by object UID (claim UID →
	// policy), and claimObject the reverse: what an update replaces.
	objectClaims map[string]map[string]string
	claimObject  map[string]string
	// replacing are claims a pending update replaces (UID → deleted
	// meanwhile): they count until the update settles.
	replacing map[string]bool

	regInformer, grantInformer, claimInformer, bucketInformer, policyInformer cache.SharedIndexInformer

	claims workqueue.TypedRateLimitingInterface[string]
	// materialize creates the claims of pending grants.
	materialize workqueue.TypedRateLimitingInterface[string]
	buckets     workqueue.TypedRateLimitingInterface[quota.BucketID]
	statuses    workqueue.TypedRateLimitingInterface[statusKey]

	nsMu       sync.Mutex
	namespaces map[string]bool // bucket namespaces known to exist
	// nsWait writes buckets whose namespace did not exist once it does.
	nsWait *namespaceWaiter

	// objects ties claims without a valid owner to their objects.
	objects *objectWatch
	// projects knows each Project's organization, where its buckets live.
	projects *projectOrgs
	// sealer signs and checks Granted decisions.
	sealer *sealer
	// budgetRecords are the budget holds this term keeps in the journal, by
	// grant namespace/name (t.mu); budgetMu serializes their journal writes.
	budgetRecords map[string]*budgetRecord
	budgetMu      sync.Mutex
	// ctx is the term's context, for the informers objects starts.
	ctx context.Context
}

type statusKind int

const (
	kindGrant statusKind = iota
	kindRegistration
	kindPolicy
)

type statusKey struct {
	kind statusKind
	key  string // grant UID or registration name
}

func newTerm(r *Runner, l *ledger, j *journal, inflight map[string]string) *term {
	rl := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 5*time.Second)
	}
	t := &term{
		r: r, ledger: l, journal: j,
		eng:             quota.NewEngine(),
		claimKeys:       map[string]string{},
		grantKeys:       map[string]string{},
		inflight:        inflight,
		projected:       map[string]struct{}{},
		firstSeen:       map[string]time.Time{},
		kick:            make(chan struct{}, 1),
		commits:         make(chan commitReq, 4096),
		committerDone:   make(chan struct{}),
		pending:         map[string]*pendingClaim{},
		pendingByObject: map[string]map[string]struct{}{},
		updating:        map[string]uint64{},
		objectClaims:    map[string]map[string]string{},
		claimObject:     map[string]string{},
		replacing:       map[string]bool{},
		claims:          workqueue.NewTypedRateLimitingQueue(rl()),
		materialize:     workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 2*time.Second)),
		buckets:         workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[quota.BucketID](5*time.Millisecond, 5*time.Second)),
		statuses:        workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[statusKey](5*time.Millisecond, 5*time.Second)),
		namespaces:      map[string]bool{},
		budgetRecords:   map[string]*budgetRecord{},
	}
	t.objects = newObjectWatch(t)
	t.projects = &projectOrgs{t: t}
	t.nsWait = newNamespaceWaiter(t)
	return t
}

func (t *term) kickNow() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

func (t *term) shutdownQueues() {
	t.claims.ShutDown()
	t.materialize.ShutDown()
	t.buckets.ShutDown()
	t.statuses.ShutDown()
	t.objects.queue.ShutDown()
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (t *term) registrationChanged(r *quotav1alpha1.ResourceRegistration) {
	t.mu.Lock()
	t.eng.UpsertRegistration(convert.Registration(r))
	t.mu.Unlock()
	t.enqueueAllPolicies()
	t.kickNow()
}

// enqueueAllPolicies re-validates every policy (their literal resource types
// must be registered).
func (t *term) enqueueAllPolicies() {
	if t.policyInformer == nil {
		return
	}
	for _, k := range t.policyInformer.GetStore().ListKeys() {
		t.statuses.Add(statusKey{kind: kindPolicy, key: k})
	}
}

func (t *term) registrationDeleted(r *quotav1alpha1.ResourceRegistration) {
	t.mu.Lock()
	t.eng.RemoveRegistration(r.Name)
	t.mu.Unlock()
	t.enqueueAllPolicies()
	t.kickNow()
}

func (t *term) grantChanged(g *quotav1alpha1.ResourceGrant) {
	t.mu.Lock()
	t.grantKeys[string(g.UID)] = key(g.Namespace, g.Name)
	t.eng.UpsertGrant(convert.Grant(g))
	holds := len(t.budgetRecords) > 0
	t.mu.Unlock()
	if holds {
		go t.settleBudgetRecords() // the grant may have settled its budget hold
	}
	t.kickNow()
}

func (t *term) grantDeleted(g *quotav1alpha1.ResourceGrant) {
	t.mu.Lock()
	delete(t.grantKeys, string(g.UID))
	t.eng.RemoveGrant(string(g.UID))
	holds := len(t.budgetRecords) > 0
	t.mu.Unlock()
	if holds {
		go t.settleBudgetRecords()
	}
	t.kickNow()
}

// claimAdded learns a claim. A claim whose stored status says Granted, or
// that the ledger holds as granted, was granted before and is restored as
// such; any other claim waits for a decision.
func (t *term) claimAdded(c *quotav1alpha1.ResourceClaim) {
	t.objects.observe(t.ctx, c)
	uid := string(c.UID)
	t.mu.Lock()
	if t.adoptLocked(c) || t.eng.Knows(uid) {
		t.mu.Unlock()
		t.claims.Add(uid) // write its decision now that the cache has it
		t.kickNow()       // an update's replacement changes buckets
		return
	}
	t.claimKeys[uid] = key(c.Namespace, c.Name)
	t.indexClaimLocked(c)
	_, recorded := t.inflight[uid]
	// A Granted status counts only when an engine sealed it; any other is
	// decided again (and its status rewritten), never free quota.
	if (convert.IsGranted(c) && t.sealer.trusted(c)) || recorded {
		t.eng.RestoreGranted(convert.Claim(c))
		if c.Status.DecisionSeal == "" {
			defer t.claims.Add(uid) // granted before seals existed: seal it now
		}
	} else {
		t.eng.AddClaim(convert.Claim(c))
		if t.ready {
			t.firstSeen[uid] = time.Now()
		}
	}
	t.mu.Unlock()
	t.kickNow()
}

// claimUpdated only matters when the stored status drifted from the
// decision (someone edited it): the decision is written again.
func (t *term) claimUpdated(c *quotav1alpha1.ResourceClaim) {
	t.mu.Lock()
	_, known := t.claimKeys[string(c.UID)]
	t.mu.Unlock()
	if !known {
		t.claimAdded(c)
		return
	}
	t.objects.observe(t.ctx, c) // its owner may have been removed
	t.claims.Add(string(c.UID))
}

func (t *term) claimDeleted(c *quotav1alpha1.ResourceClaim) {
	t.objects.forget(c)
	uid := string(c.UID)
	t.mu.Lock()
	if _, ok := t.replacing[uid]; ok {
		// An update replaces it: it counts until the update settles (its
		// replacement is counted in the same step, or it is released).
		t.replacing[uid] = true
		t.mu.Unlock()
		return
	}
	delete(t.claimKeys, uid)
	t.unindexClaimLocked(uid)
	delete(t.firstSeen, uid)
	t.eng.RemoveClaim(uid)
	// A grant recorded and not yet written has no claim to go to any more:
	// it leaves the ledger with the next record, so deleted claims can
	// never fill the in-flight bound and stop decisions.
	if _, ok := t.inflight[uid]; ok {
		t.projected[uid] = struct{}{}
	}
	t.mu.Unlock()
	t.kickNow()
}

// bucketObjectChanged checks a bucket object that changed, after the same
// delay as the engine's own changes: its own writes come back here too, and
// must not start the next write at once.
func (t *term) bucketObjectChanged(b *quotav1alpha1.AllowanceBucket) {
	t.buckets.AddAfter(quota.BucketID{
		Consumer:     convert.ConsumerID(b.Spec.ConsumerRef),
		ResourceType: string(b.Spec.ResourceType),
		Dims:         convert.Dimensions(b.Spec.Dimensions).Key(),
	}, bucketWriteDelay)
}

// enqueueAllBuckets checks every bucket the engine has and every bucket
// object that exists, so that stale objects are removed.
func (t *term) enqueueAllBuckets() {
	t.mu.Lock()
	ids := t.eng.BucketIDs()
	t.mu.Unlock()
	for _, id := range ids {
		t.buckets.Add(id)
	}
	for _, obj := range t.bucketInformer.GetStore().List() {
		t.bucketObjectChanged(obj.(*quotav1alpha1.AllowanceBucket))
	}
	bucketsGauge.Set(float64(len(ids)))
}

// commitReq asks the committer for a write: ops for the journal, or (nil)
// a ledger record of the in-flight grants.
type commitReq struct {
	ops  *journalOps
	done chan commitResult
}

type commitResult struct {
	// exists names the creates skipped because their claim existed.
	exists map[string]error
	err    error
}

// commit records the in-flight grants in the ledger and returns once a
// record that includes every grant made before the call has been written.
func (t *term) commit(ctx context.Context) error {
	return t.request(ctx, nil).err
}

// writeJournal writes ops to the journal, batched with every other request
// waiting, and returns once they are durable.
func (t *term) writeJournal(ctx context.Context, ops *journalOps) commitResult {
	if t.journal == nil {
		return commitResult{err: errors.New("this quota engine has no direct access to the server's storage")}
	}
	return t.request(ctx, ops)
}

func (t *term) request(ctx context.Context, ops *journalOps) commitResult {
	r := commitReq{ops: ops, done: make(chan commitResult, 1)}
	select {
	case t.commits <- r:
	case <-ctx.Done():
		return commitResult{err: ctx.Err()}
	case <-t.committerDone:
		return commitResult{err: ErrNotLeader}
	}
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		return commitResult{err: ctx.Err()}
	case <-t.committerDone:
		// The term ended before this request was served: nothing of it
		// was written (a batch being written is answered before the exit).
		select {
		case res := <-r.done:
			return res
		default:
			return commitResult{err: ErrNotLeader}
		}
	}
}

// isPermanent reports whether etcd refused a request as invalid (a
// duplicate key, too many operations, a value too large): retrying the same
// write cannot succeed.
func isPermanent(err error) bool {
	if err == nil || errors.Is(err, errDeposed) {
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

// committer serves commit requests one batch at a time: one journal write
// carries the operations of every request waiting, one ledger write every
// grant made before it. Both are fenced by the ledger's version, which only
// this goroutine changes.
func (t *term) committer(ctx context.Context, fail func(error)) {
	defer close(t.committerDone)
	for {
		var batch []commitReq
		select {
		case <-ctx.Done():
			return
		case r := <-t.commits:
			batch = append(batch, r)
		}
	drain:
		for {
			select {
			case r := <-t.commits:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		ops := &journalOps{}
		record := false
		for _, r := range batch {
			if r.ops == nil {
				record = true
			} else {
				ops.merge(r.ops)
			}
		}
		var recorded ledgerState
		if record {
			t.mu.Lock()
			for uid := range t.projected {
				delete(t.inflight, uid)
			}
			clear(t.projected)
			recorded = ledgerState{Inflight: maps.Clone(t.inflight)}
			t.ledgerStale = false
			t.mu.Unlock()
		}
		exists := map[string]error{}
		err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Steps: 1 << 30, Cap: 2 * time.Second}, func(ctx context.Context) (bool, error) {
			var err error
			if !ops.empty() {
				err = t.journal.write(ctx, ops, exists)
			}
			if err == nil && record {
				if err = t.ledger.record(ctx, recorded); err == nil {
					ledgerWrites.Inc()
					record = false
				}
			}
			if errors.Is(err, errDeposed) || isPermanent(err) {
				return false, err
			}
			if err != nil {
				klog.FromContext(ctx).Error(err, "Writing the ledger or journal failed; retrying")
				return false, nil
			}
			return true, nil
		})
		for _, r := range batch {
			r.done <- commitResult{exists: exists, err: err}
		}
		if isPermanent(err) {
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
