package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Options configure the engine.
type Options struct {
	// SystemNamespace holds the leader Lease, the ledger, and the buckets of
	// consumers without a namespace of their own.
	SystemNamespace string
	// Identity names this replica in the Lease; defaults to host_pid_random.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers write claim statuses and buckets in parallel.
	Workers int
	// Handle, when set, lets in-process admission use this engine while it
	// leads.
	Handle *Handle
	// Parents declare where each consumer kind's parent is found, for
	// registrations with parentConsumerTypes. Nil: DefaultParents.
	Parents []ParentRelation
	// parentFlags are --consumer-parent values, parsed by Complete.
	parentFlags []string
}

// DefaultOptions are the production defaults.
func DefaultOptions() Options {
	return Options{
		SystemNamespace: "quotaplane-system",
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		Workers:         16,
	}
}

const (
	leaseName = "quotaplane-quota-engine"
	// LedgerName is the ConfigMap, in the system namespace, that fences
	// the engine's decisions.
	LedgerName = "quotaplane-decision-ledger"
)

// Runner campaigns for leadership and, while leader, runs the engine.
type Runner struct {
	opts     Options
	kube     kubernetes.Interface
	metadata metadata.Interface
	// dynamic reads whole objects, to check how an update ended.
	dynamic dynamic.Interface
	rest    *rest.RESTClient
	client  client.Client
	// schemas finds trigger kinds' schemas, to judge policies' CEL cost.
	schemas *triggerschema.Resolver
	// terms counts the terms this process has led.
	terms int
}

// New creates a runner for the API server reached through cfg.
func New(cfg *rest.Config, opts Options) (*Runner, error) {
	def := DefaultOptions()
	if opts.SystemNamespace == "" {
		opts.SystemNamespace = def.SystemNamespace
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = def.LeaseDuration, def.RenewDeadline, def.RetryPeriod
	}
	if opts.Workers == 0 {
		opts.Workers = def.Workers
	}
	if len(opts.parentFlags) > 0 {
		opts.Parents = nil
		for _, f := range opts.parentFlags {
			rel, err := ParseParentRelation(f)
			if err != nil {
				return nil, err
			}
			opts.Parents = append(opts.Parents, rel)
		}
	}
	if opts.Parents == nil {
		opts.Parents = DefaultParents()
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = fmt.Sprintf("%s_%d_%s", host, os.Getpid(), rand.String(6))
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg = rest.AddUserAgent(cfg, "quotaplane-quota-engine")
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := newRESTClient(cfg)
	if err != nil {
		return nil, err
	}
	// The quota kinds are CRDs: JSON only, whatever the loopback config prefers.
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cl, err := client.New(jsonCfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	registerMetrics()
	return &Runner{opts: opts, kube: kube, metadata: md, dynamic: dyn, rest: rc, client: cl, schemas: triggerschema.New(kube.Discovery(), 0)}, nil
}

// Start runs the engine in the background until ctx is done. It matches the
// server's Component signature.
func Start(opts Options) func(ctx context.Context, cfg *rest.Config) error {
	return func(ctx context.Context, cfg *rest.Config) error {
		r, err := New(cfg, opts)
		if err != nil {
			return err
		}
		go func() { _ = r.Run(ctx) }()
		return nil
	}
}

// CheckStore refuses, before campaigning, to run an engine without
// admission's journal on a store where quotaplane serve's engine has run
// (ErrJournalInUse): the ledger says so. The same check is made again at
// every stamp, for a serve that appears later.
func (r *Runner) CheckStore(ctx context.Context) error {
	if r.opts.Handle != nil && r.opts.Handle.storage.Load() != nil {
		return nil
	}
	cm, err := r.kube.CoreV1().ConfigMaps(r.opts.SystemNamespace).Get(ctx, LedgerName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the ledger %s/%s: %w", r.opts.SystemNamespace, LedgerName, err)
	}
	if cm.Data[ledgerJournalKey] == "true" {
		return ErrJournalInUse
	}
	return nil
}

// Run campaigns for leadership until ctx is done. While leader it decides;
// when it loses leadership, or finds the ledger taken over, it stops deciding
// at once and campaigns again. It returns an error only when it must not run
// on this store at all (ErrJournalInUse).
func (r *Runner) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("identity", r.opts.Identity)
	ctx = klog.NewContext(ctx, logger)
	var fatal error
	for ctx.Err() == nil && fatal == nil {
		if err := r.ensureNamespace(ctx, r.opts.SystemNamespace); err != nil {
			logger.Error(err, "Cannot create the system namespace; retrying", "namespace", r.opts.SystemNamespace)
			sleep(ctx, r.opts.RetryPeriod)
			continue
		}
		campaign, stop := context.WithCancel(ctx)
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: r.opts.SystemNamespace, Name: leaseName},
			Client:     r.kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: r.opts.Identity},
		}
		leaderelection.RunOrDie(campaign, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   r.opts.LeaseDuration,
			RenewDeadline:   r.opts.RenewDeadline,
			RetryPeriod:     r.opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leading context.Context) {
					isLeader.Set(1)
					defer isLeader.Set(0)
					err := r.lead(leading)
					if errors.Is(err, ErrJournalInUse) {
						fatal = err
					}
					if err != nil && leading.Err() == nil {
						logger.Error(err, "Quota engine stopped deciding")
					}
					stop() // give the lease up so that a healthy replica takes over
				},
				OnStoppedLeading: func() {
					logger.V(2).Info("No longer the quota engine leader")
				},
			},
		})
		stop()
		if fatal == nil {
			sleep(ctx, r.opts.RetryPeriod)
		}
	}
	return fatal
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// ensureNamespace creates the system namespace, which holds the engine's own
// records (its Lease, ledger and seal key). It is the only namespace the
// engine creates: bucket namespaces are their owners' (bucketNamespaceReady).
func (r *Runner) ensureNamespace(ctx context.Context, ns string) error {
	_, err := r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	return err
}

// lead runs one term of leadership: stamp the ledger, rebuild the state from
// a quorum read of every registration, grant and claim, honour the grants the
// previous leader recorded, then decide until the term ends.
func (r *Runner) lead(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	began := time.Now()
	l := &ledger{client: r.kube, namespace: r.opts.SystemNamespace, name: LedgerName, holder: r.opts.Identity}
	if r.opts.Handle != nil {
		l.journal = r.opts.Handle.storage.Load() != nil
	}
	recorded, err := l.stamp(ctx)
	if err != nil {
		return err
	}
	ledgerWrites.Inc()
	var j *journal
	var pending []*pendingClaim
	var holds []*budgetRecord
	if r.opts.Handle != nil {
		if s := r.opts.Handle.storage.Load(); s != nil {
			j = &journal{s: s, ledger: l}
			// Read after the stamp: no deposed leader can add to it any more.
			if pending, err = j.pending(ctx); err != nil {
				return err
			}
			if holds, err = j.budgetHolds(ctx); err != nil {
				return err
			}
		}
	}
	seal, err := r.loadSealer(ctx)
	if err != nil {
		return err
	}
	t := newTerm(r, l, j, recorded.Inflight)
	t.sealer = seal
	// Taking over from this replica's previous process (same identity, first
	// term here): its requests died with it, so the creates of its pending
	// grants have ended. From any other leader, they may still be running.
	restarted := recorded.Holder == r.opts.Identity && r.terms == 0
	r.terms++
	// Grants made at admission whose claims are not written yet: hold them
	// now, before any claim is seen.
	for _, p := range pending {
		if restarted {
			p.outcome, p.ended = outcomeUnclear, time.Now()
		}
		t.holdPending(p)
	}
	// Budget holds of grants admitted and not yet seen stored, likewise.
	var held []quota.Grant
	for _, h := range holds {
		t.holdBudget(h)
		held = append(held, h.grant())
	}
	logger.Info("Became the quota engine leader", "epoch", l.epoch, "inflightGrants", len(recorded.Inflight), "admissionGrants", len(pending), "budgetHolds", len(holds))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t.ctx = ctx
	if err := t.startInformers(ctx); err != nil {
		return err
	}
	defer t.observe()()
	t.mu.Lock()
	t.ready = true
	claims := len(t.claimKeys)
	// Grants the ledger holds for claims that no longer exist (deleted
	// before their decision was written) are dropped at the next record.
	for uid := range t.inflight {
		if _, ok := t.claimKeys[uid]; !ok {
			t.projected[uid] = struct{}{}
		}
	}
	t.mu.Unlock()
	if len(held) > 0 {
		// Holds the stored grants did not settle: looked up once their
		// requests cannot be writing any more (at once when they died with
		// this replica's previous process).
		delay := budgetLookupDelay
		if restarted {
			delay = 0
		}
		go t.lookUpBudgetHolds(held, delay)
	}
	recoverySeconds.Set(time.Since(began).Seconds())
	logger.Info("Rebuilt quota state from stored objects", "claims", claims, "duration", time.Since(began))

	var wg sync.WaitGroup
	var failure error
	var failOnce sync.Once
	fail := func(err error) {
		failOnce.Do(func() { failure = err })
		cancel()
	}
	wg.Add(1)
	go func() { defer wg.Done(); t.committer(ctx, fail) }()
	for range r.opts.Workers {
		wg.Add(4)
		go func() { defer wg.Done(); work(ctx, t.materialize, "admitted claim", t.materializeOne) }()
		go func() { defer wg.Done(); work(ctx, t.claims, "claim decision", t.writeClaim) }()
		go func() { defer wg.Done(); work(ctx, t.buckets, "bucket", t.writeBucket) }()
		go func() { defer wg.Done(); work(ctx, t.statuses, "condition", t.writeStatus) }()
	}
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); work(ctx, t.objects.queue, "claim of a deleted object", t.objects.check) }()
	}
	// Honour what the previous leader recorded: write those grants first.
	for uid := range recorded.Inflight {
		t.claims.Add(uid)
	}
	for _, p := range pending {
		t.materialize.Add(p.key())
	}
	t.enqueueAllBuckets()
	if r.opts.Handle != nil {
		r.opts.Handle.term.Store(t)
	}
	err = t.decideLoop(ctx)
	if r.opts.Handle != nil {
		r.opts.Handle.term.CompareAndSwap(t, nil)
	}
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	cancel()
	t.shutdownQueues()
	wg.Wait()
	if failure != nil {
		return failure
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func eventObject(obj any) runtime.Object {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, _ := obj.(runtime.Object)
	return o
}

func (t *term) startInformers(ctx context.Context) error {
	t.regInformer = quorumInformer(t.r.rest, "resourceregistrations", &quotav1alpha1.ResourceRegistration{}, func() runtime.Object { return &quotav1alpha1.ResourceRegistrationList{} })
	t.grantInformer = quorumInformer(t.r.rest, "resourcegrants", &quotav1alpha1.ResourceGrant{}, func() runtime.Object { return &quotav1alpha1.ResourceGrantList{} })
	t.claimInformer = quorumInformer(t.r.rest, "resourceclaims", &quotav1alpha1.ResourceClaim{}, func() runtime.Object { return &quotav1alpha1.ResourceClaimList{} })
	t.bucketInformer = quorumInformer(t.r.rest, "allowancebuckets", &quotav1alpha1.AllowanceBucket{}, func() runtime.Object { return &quotav1alpha1.AllowanceBucketList{} })
	if err := t.bucketInformer.AddIndexers(cache.Indexers{indexBucketName: bucketNameIndex}); err != nil {
		return err
	}
	t.policyInformer = quorumInformer(t.r.rest, "claimcreationpolicies", &quotav1alpha1.ClaimCreationPolicy{}, func() runtime.Object { return &quotav1alpha1.ClaimCreationPolicyList{} })
	policyChanged := func(obj any) {
		if cp, ok := obj.(*quotav1alpha1.ClaimCreationPolicy); ok {
			t.statuses.Add(statusKey{kind: kindPolicy, key: cp.Name})
		}
	}
	// The state is rebuilt only once every handler has received every
	// object of its informer's first list: an informer's HasSynced says
	// only that its store has them, while handlers run on goroutines of
	// their own. Deciding before a handler has restored every granted claim
	// would decide against room that is taken.
	var handlers []cache.InformerSynced
	track := func(reg cache.ResourceEventHandlerRegistration, err error) error {
		if err == nil {
			handlers = append(handlers, reg.HasSynced)
		}
		return err
	}
	if err := track(t.policyInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: policyChanged, UpdateFunc: func(_, obj any) { policyChanged(obj) },
	})); err != nil {
		return err
	}

	err := track(t.regInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.registrationChanged(obj.(*quotav1alpha1.ResourceRegistration)) },
		UpdateFunc: func(_, obj any) { t.registrationChanged(obj.(*quotav1alpha1.ResourceRegistration)) },
		DeleteFunc: func(obj any) {
			if r, ok := eventObject(obj).(*quotav1alpha1.ResourceRegistration); ok {
				t.registrationDeleted(r)
			}
		},
	}))
	if err != nil {
		return err
	}
	err = track(t.grantInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.grantChanged(obj.(*quotav1alpha1.ResourceGrant)) },
		UpdateFunc: func(_, obj any) { t.grantChanged(obj.(*quotav1alpha1.ResourceGrant)) },
		DeleteFunc: func(obj any) {
			if g, ok := eventObject(obj).(*quotav1alpha1.ResourceGrant); ok {
				t.grantDeleted(g)
			}
		},
	}))
	if err != nil {
		return err
	}
	err = track(t.claimInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.claimAdded(obj.(*quotav1alpha1.ResourceClaim)) },
		UpdateFunc: func(_, obj any) { t.claimUpdated(obj.(*quotav1alpha1.ResourceClaim)) },
		DeleteFunc: func(obj any) {
			if c, ok := eventObject(obj).(*quotav1alpha1.ResourceClaim); ok {
				t.claimDeleted(c)
			}
		},
	}))
	if err != nil {
		return err
	}
	err = track(t.bucketInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// A bucket object changed by someone else is put back.
		UpdateFunc: func(_, obj any) { t.bucketObjectChanged(obj.(*quotav1alpha1.AllowanceBucket)) },
		DeleteFunc: func(obj any) {
			if b, ok := eventObject(obj).(*quotav1alpha1.AllowanceBucket); ok {
				t.bucketObjectChanged(b)
			}
		},
	}))
	if err != nil {
		return err
	}
	consumers, err := t.watchConsumers(ctx)
	if err != nil {
		return err
	}
	handlers = append(handlers, consumers...)
	for _, inf := range []cache.SharedIndexInformer{t.regInformer, t.grantInformer, t.claimInformer, t.bucketInformer, t.policyInformer} {
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), handlers...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	return nil
}

// decideLoop decides whenever something changed, records new grants in the
// ledger, and hands the results to the writers.
func (t *term) decideLoop(ctx context.Context) error {
	t.kickNow()
	resync := time.NewTicker(time.Minute)
	defer resync.Stop()
	flush := time.NewTicker(ledgerFlushPeriod)
	defer flush.Stop()
	for {
		force := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.kick:
		case <-flush.C:
			force = true
		case <-resync.C:
			t.enqueueAllBuckets()
			continue
		}
		if err := t.decideOnce(ctx, force); err != nil {
			return err
		}
	}
}

// maxInflight bounds the grants recorded in the ledger and not yet written
// to their claims (about 100 bytes each in the ledger).
const maxInflight = 2000

// bucketWriteDelay is how long an AllowanceBucket's status may lag the
// engine's accounting. Decisions never read it; it is the tenants' view.
const bucketWriteDelay = 100 * time.Millisecond

// ledgerFlushPeriod bounds how long grants already written to their claims
// stay listed in the ledger when no new grant comes to carry their removal.
const ledgerFlushPeriod = time.Second

// decideOnce decides, then records new grants in the ledger before any is
// written to a claim. Removing grants already written rides along with the
// next record, or is flushed when force is set.
func (t *term) decideOnce(ctx context.Context, force bool) error {
	t.mu.Lock()
	// Grants already written to their claims need not stay in the ledger;
	// the ledger's copy is a superset until the next record, which is safe.
	for uid := range t.projected {
		delete(t.inflight, uid)
		t.ledgerStale = true
	}
	clear(t.projected)
	// Bound what is recorded but not yet written, so that the ledger stays
	// small: the rest waits for the writers.
	changed, more := t.eng.DecideUpTo(max(0, maxInflight-len(t.inflight)))
	t.blocked = more
	buckets, grants, regs := t.eng.TakeChanged()
	now := time.Now()
	var granted int
	for _, ch := range changed {
		if ch.Decision.Outcome == quota.Granted {
			t.inflight[ch.UID] = t.claimKeys[ch.UID]
			granted++
		}
		if seen, ok := t.firstSeen[ch.UID]; ok {
			result := "denied"
			if ch.Decision.Outcome == quota.Granted {
				result = "granted"
			}
			decisionLatency.WithLabelValues(result).Observe(now.Sub(seen).Seconds())
			delete(t.firstSeen, ch.UID)
		}
	}
	dirtyLedger := granted > 0 || (force && t.ledgerStale)
	pendingClaims.Set(float64(t.eng.Waiting()))
	t.mu.Unlock()

	if dirtyLedger {
		if err := t.commit(ctx); err != nil {
			return err
		}
	}
	for _, ch := range changed {
		t.claims.Add(ch.UID)
	}
	for _, id := range buckets {
		// Coalesced: a bucket that changes on every create is written at
		// most once per bucketWriteDelay, showing every change up to then.
		t.buckets.AddAfter(id, bucketWriteDelay)
	}
	for _, uid := range grants {
		t.statuses.Add(statusKey{kind: kindGrant, key: uid})
	}
	for _, n := range regs {
		t.statuses.Add(statusKey{kind: kindRegistration, key: n})
	}
	return nil
}

// AddFlags registers the engine's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SystemNamespace, "system-namespace", o.SystemNamespace, "Namespace of the engine's Lease and ledger, and of the AllowanceBuckets of consumers without a namespace of their own (Organizations' buckets live in organization-<name>).")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a replica waits after the leader stops renewing before it takes over.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps retrying to renew before it stops deciding.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often replicas try to acquire or renew leadership.")
	fs.IntVar(&o.Workers, "quota-workers", o.Workers, "Parallel writers of claim decisions and buckets.")
	fs.StringArrayVar(&o.parentFlags, "consumer-parent", nil, "Where a consumer kind's parent is found, for registrations with spec.parentConsumerTypes: Kind.group=ParentKind.group:label-key, "+
		"the child naming its parent in that label (repeat for more levels). Default: Project.resourcemanager.miloapis.com=Organization.resourcemanager.miloapis.com:"+rmv1alpha1.OrganizationNameLabel+".")
}

// StableIdentity is a leader-election identity that stays the same across
// restarts of one replica (host and data directory), so that a restarted
// replica takes its own lease back at once instead of waiting for it to
// expire. Two live replicas never share one: a data directory is locked.
func StableIdentity(role, dataDir string) string {
	host, _ := os.Hostname()
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return fmt.Sprintf("%s-%s-%s", role, host, hex.EncodeToString(sum[:4]))
}
