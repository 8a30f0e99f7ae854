package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/existing"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/engine/settle"
	"github.com/quotaplane/quotaplane/internal/engine/status"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// term is one term of leadership: the cache rebuilt for it, the informers
// feeding it, and the reconcilers writing what it decides. All of it lives
// and dies with the term.
type term struct {
	r         *Runner
	ctx       context.Context
	cache     *cache.Cache
	committer *fence.Committer
	sealer    *fence.Sealer

	regInformer, grantInformer, claimInformer, bucketInformer, policyInformer toolscache.SharedIndexInformer
	// consumers are the Organizations, Projects and Namespaces that exist.
	consumers *consumerDirectory

	claimQueue     reconcile.Queue[string]
	bucketQueue    reconcile.Queue[quota.BucketID]
	conditionQueue reconcile.Queue[status.Key]
	claims         *status.ClaimWriter
	// fresh holds a new claim's first denial until every grant written
	// before it is known.
	fresh      *grantFreshness
	buckets    *status.BucketWriter
	conditions *status.ConditionWriter
	settler    *settle.Settler
	objects    *settle.ObjectWatch
	// charger charges the objects that exist when a policy comes into force.
	charger *existing.Charger

	// source and recorder show the term to operators (nil recorder: none).
	source   *observe.Source
	recorder *observe.HistoryWriter
	// budgetMu serializes the journal writes of budget holds.
	budgetMu sync.Mutex
}

// bucketWriteDelay is how long an AllowanceBucket's status may lag the
// engine's accounting. Decisions never read it; it is the tenants' view.
const bucketWriteDelay = 100 * time.Millisecond

// ledgerFlushPeriod bounds how long grants already written to their claims
// stay listed in the ledger when no new grant comes to carry their removal.
const ledgerFlushPeriod = time.Second

// lead runs one term of leadership: stamp the ledger, rebuild the state from
// a quorum read of every registration, grant and claim, honour the grants the
// previous leader recorded, then decide until the term ends.
func (r *Runner) lead(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	began := time.Now()
	var storage *fence.Storage
	if r.opts.Handle != nil {
		storage = r.opts.Handle.Storage()
	}
	l := fence.NewLedger(r.kube, r.opts.SystemNamespace, r.opts.Identity, storage != nil)
	recorded, err := l.Stamp(ctx)
	if err != nil {
		return err
	}
	var j *fence.Journal
	var pending []*formats.PendingClaim
	var holds []*formats.BudgetHold
	if storage != nil {
		if j, err = fence.NewJournal(storage, l); err != nil {
			return err
		}
		// Read after the stamp: no deposed leader can add to it any more.
		if pending, err = j.Pending(ctx); err != nil {
			return err
		}
		if holds, err = j.BudgetHolds(ctx); err != nil {
			return err
		}
	}
	seal, err := fence.LoadSealer(ctx, r.kube, r.opts.SystemNamespace)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t := r.newTerm(ctx, l, j, seal, recorded.Inflight)
	// Grant window phases earlier leaders recorded: honoured from the
	// moment their grants are seen, whatever this replica's clock says.
	t.cache.RestoreWindows(recorded.Windows)
	// Taking over from this replica's previous process (same identity, first
	// term here): its requests died with it, so the creates of its pending
	// grants have ended. From any other leader, they may still be running.
	restarted := recorded.Holder == r.opts.Identity && r.terms == 0
	r.terms++
	// Grants made at admission whose claims are not written yet: hold them
	// now, before any claim is seen.
	for _, p := range pending {
		if restarted {
			p.Outcome, p.Ended = formats.OutcomeUnclear, time.Now()
		}
		t.cache.HoldPending(p)
	}
	// Budget holds of grants admitted and not yet seen stored, likewise.
	var held []quota.Grant
	for _, h := range holds {
		t.cache.RestoreBudgetHold(h)
		held = append(held, h.Grant())
	}
	logger.Info("Became the quota engine leader", "epoch", l.Epoch(), "inflightGrants", len(recorded.Inflight), "admissionGrants", len(pending), "budgetHolds", len(holds))

	// The informers' first lists and the state built from them are
	// allocated at once: the collector waits for them within the memory
	// limit, if there is one.
	release := cache.HoldCollector()
	if err := t.startInformers(ctx); err != nil {
		release()
		return err
	}
	defer t.observe()()
	claims := t.cache.MarkReady()
	release()
	if len(held) > 0 {
		// Holds the stored grants did not settle: looked up once their
		// requests cannot be writing any more (at once when they died with
		// this replica's previous process).
		delay := settle.BudgetLookupDelay
		if restarted {
			delay = 0
		}
		go t.settler.LookUpBudgetHolds(held, delay)
	}
	enginemetrics.RecoverySeconds.Set(time.Since(began).Seconds())
	logger.Info("Rebuilt quota state from stored objects", "claims", claims, "duration", time.Since(began))

	var wg sync.WaitGroup
	var failure error
	var failOnce sync.Once
	fail := func(err error) {
		failOnce.Do(func() { failure = err })
		cancel()
	}
	wg.Go(func() { t.committer.Run(ctx, fail) })
	for range r.opts.Workers {
		wg.Go(func() { reconcile.Run(ctx, t.settler.Queue, "admitted claim", t.settler.Reconcile) })
		wg.Go(func() { reconcile.Run(ctx, t.claimQueue, "claim decision", t.claims.Reconcile) })
		wg.Go(func() { reconcile.Run(ctx, t.bucketQueue, "bucket", t.buckets.Reconcile) })
		wg.Go(func() { reconcile.RunRequeue(ctx, t.conditionQueue, "condition", t.conditions.Reconcile) })
	}
	for range 2 {
		wg.Go(func() { reconcile.Run(ctx, t.objects.Queue, "claim of a deleted object", t.objects.Reconcile) })
	}
	// Honour what the previous leader recorded: write those grants first.
	for uid := range recorded.Inflight {
		t.claimQueue.Add(uid)
	}
	for _, p := range pending {
		t.settler.Queue.Add(p.Key())
	}
	t.enqueueAllBuckets()
	wg.Go(func() { t.answerRebuild(ctx, cancel) })
	at := t.admissionTerm()
	if r.opts.Handle != nil {
		r.opts.Handle.Lead(at)
	}
	if r.opts.Handle != nil && t.committer.HasJournal() {
		// Only an engine that writes admission's journal charges: the
		// claims of existing objects are written the way admission's are.
		t.charger.Charge = at.ChargeExisting
		wg.Go(func() { reconcile.Run(ctx, t.charger.Queue, "existing objects of a policy", t.charger.Reconcile) })
	}
	err = t.decideLoop(ctx)
	if r.opts.Handle != nil {
		r.opts.Handle.Resign(at)
	}
	t.cache.Stop()
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

// enqueueBucketsOf queues the buckets a grant gives to.
func (t *term) enqueueBucketsOf(g quota.Grant) {
	for _, id := range g.BucketIDs() {
		t.bucketQueue.Add(id)
	}
}

// newTerm assembles a term's cache, committer and reconcilers.
func (r *Runner) newTerm(ctx context.Context, l *fence.Ledger, j *fence.Journal, seal *fence.Sealer, inflight map[string]string) *term {
	t := &term{r: r, ctx: ctx, sealer: seal}
	t.cache = cache.New(inflight, seal.Trusted)
	t.committer = fence.NewCommitter(l, j, t.cache.InflightRecord)
	t.claimQueue = reconcile.NewQueue[string](5*time.Millisecond, 5*time.Second)
	t.bucketQueue = reconcile.NewQueue[quota.BucketID](5*time.Millisecond, 5*time.Second)
	t.conditionQueue = reconcile.NewQueue[status.Key](5*time.Millisecond, 5*time.Second)
	t.settler = &settle.Settler{Queue: settle.NewQueue(), HoldPeriod: r.opts.HoldPeriod, Cache: t.cache, Committer: t.committer, Sealer: seal,
		Metadata: r.metadata, Dynamic: r.dynamic, Planes: r.planes, Client: r.client, Served: r.served, BudgetMu: &t.budgetMu, Ctx: ctx}
	t.objects = settle.NewObjectWatch(r.metadata, r.client, r.served, func(k string) (*quotav1alpha1.ResourceClaim, bool, error) {
		return stored[*quotav1alpha1.ResourceClaim](t.claimInformer, k)
	})
	t.objects.Planes = r.planes
	updateStatus := func(ctx context.Context, o client.Object) error { return r.client.Status().Update(ctx, o) }
	t.fresh = &grantFreshness{md: r.metadata, requeue: func(uid string) { t.claimQueue.Add(uid) }}
	t.claims = &status.ClaimWriter{
		Decision:         t.cache.ClaimDecision,
		FirstDenialReady: func(uid, rv string) bool { return t.fresh.denialReady(ctx, uid, rv) },
		Stored: func(k string) (*quotav1alpha1.ResourceClaim, bool, error) {
			return stored[*quotav1alpha1.ResourceClaim](t.claimInformer, k)
		},
		UpdateStatus: func(ctx context.Context, c *quotav1alpha1.ResourceClaim) error { return updateStatus(ctx, c) },
		Written:      t.cache.ClaimWritten,
		Kick:         t.cache.Notify,
		Sealer:       seal,
	}
	t.conditions = &status.ConditionWriter{
		ExpiryWarning: r.opts.ExpiryWarning, Now: r.now, ExpiryChanged: t.enqueueBucketsOf,
		GrantKey: t.cache.GrantKey,
		Grant: func(k string) (*quotav1alpha1.ResourceGrant, bool, error) {
			return stored[*quotav1alpha1.ResourceGrant](t.grantInformer, k)
		},
		Registration: func(k string) (*quotav1alpha1.ResourceRegistration, bool, error) {
			return stored[*quotav1alpha1.ResourceRegistration](t.regInformer, k)
		},
		Policy: func(k string) (*quotav1alpha1.ClaimCreationPolicy, bool, error) {
			return stored[*quotav1alpha1.ClaimCreationPolicy](t.policyInformer, k)
		},
		Read:    t.cache.Read,
		Schemas: r.triggerSchemas,
		Consumer: func(id quota.ConsumerID) (bool, bool, []string) {
			return t.consumers.Lookup(id)
		},
		KindServed: func(gk schema.GroupKind) (bool, string, error) {
			return r.kinds.Kind(gk)
		},
		RegisteredTypes: func() (types []string) {
			t.cache.Read(func(acc *accounting.Accounts) { types = acc.RegisteredTypes() })
			return types
		},
		Event: func(obj runtime.Object, eventType, reason, message string) {
			r.eventRecorder().Event(obj, eventType, reason, message)
		},
		UpdateStatus: updateStatus,
	}
	t.charger = &existing.Charger{
		Queue: existing.NewQueue(),
		Policy: func(k string) (*quotav1alpha1.ClaimCreationPolicy, bool, error) {
			return stored[*quotav1alpha1.ClaimCreationPolicy](t.policyInformer, k)
		},
		Mapper:          r.mapper,
		Dynamic:         r.dynamic,
		NamespaceOpen:   r.namespaceOpen,
		Units:           t.unitsOf,
		Client:          r.client,
		Events:          r.eventRecorder,
		SystemNamespace: r.opts.SystemNamespace,
		Exemptions:      governed.NewExemptions(r.opts.SystemNamespace, r.opts.ExemptNamespaces),
		Planes:          func(ctx context.Context) ([]planes.Listed, error) { return planes.List(ctx, r.dynamic) },
		PlaneDynamic:    func(p planes.Plane) (dynamic.Interface, error) { return r.planes.Dynamic(p) },
		ImpactEvery:     r.opts.PolicyImpactEvery,
	}
	placement := status.NewPlacement(ctx, r.opts.SystemNamespace, r.kube, r.metadata,
		func(id quota.BucketID) { t.bucketQueue.Add(id) }, t.consumerBuckets)
	t.buckets = &status.BucketWriter{
		Bucket: t.bucket,
		Registration: func(rt string) *quotav1alpha1.ResourceRegistration {
			return status.RegistrationFor(t.regInformer.GetStore(), rt)
		},
		Client:    r.client,
		Placement: placement,
		Events:    r.eventRecorder,
		Verified:  func(quota.BucketID, *quotav1alpha1.AllowanceBucket, quota.BucketStatus, time.Time) {},
		Gone:      func(quota.BucketID) {},

		ExpiryWarning: r.opts.ExpiryWarning, Now: r.now,
	}
	return t
}

// unitsOf is the base unit, as a quantity, a resource type's registration
// declares.
func (t *term) unitsOf(resourceType string) (unit string, ok bool) {
	t.cache.Read(func(acc *accounting.Accounts) { unit, ok = acc.BaseUnitQuantity(resourceType) })
	return unit, ok
}

// namespaceOpen says why a namespace cannot hold claims: it does not exist,
// or it is being deleted.
func (r *Runner) namespaceOpen(ctx context.Context, ns string) error {
	n, err := r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return errors.New("does not exist")
	case err != nil:
		return err
	case n.DeletionTimestamp != nil:
		return errors.New("is being deleted")
	}
	return nil
}

// admissionTerm is what admission uses while this term leads.
func (t *term) admissionTerm() *admit.Term {
	at := &admit.Term{
		Cache:       t.cache,
		Committer:   t.committer,
		Settle:      func(k string) { t.settler.Queue.Add(k) },
		SettleLater: func(k string) { t.settler.Queue.AddAfter(k, settle.RecheckPeriod) },
		BudgetEnded: t.settler.BudgetEnded,
		BudgetMu:    &t.budgetMu,
		Now:         t.r.now,
	}
	if t.recorder != nil {
		at.RecordRefusal = t.recorder.Refusal
	}
	return at
}

// bucket is the accounts' state of a bucket and, for a group, its members.
func (t *term) bucket(id quota.BucketID) (st quota.BucketStatus, exists bool, members []quota.ConsumerID) {
	t.cache.Read(func(acc *accounting.Accounts) {
		st, exists = acc.Bucket(id)
		if exists && id.Consumer.IsGroup() {
			members = acc.GroupMembers(id.Consumer)
		}
	})
	return st, exists, members
}

// consumerBuckets are the buckets of one consumer (a look-up per resource
// type under the cache's lock, not a walk of every bucket).
func (t *term) consumerBuckets(c quota.ConsumerID) []quota.BucketID {
	return t.cache.ConsumerBucketIDs(c)
}

// observe starts what shows the term's state to operators — the state
// metrics and the decision history — once its informers have synced; the
// returned function ends it with the term.
func (t *term) observe() func() {
	x := t.r.opts.Exporter
	if x == nil {
		return func() {}
	}
	t.source = &observe.Source{Registrations: t.regInformer.GetStore(), Grants: t.grantInformer.GetStore(),
		Claims: t.claimInformer.GetStore(), Policies: t.policyInformer.GetStore()}
	h := observe.NewHistoryWriter(x, t.r.kube, t.r.opts.SystemNamespace, t.cache.BucketNumbers)
	t.recorder = h
	src := t.source
	t.buckets.Verified = func(id quota.BucketID, b *quotav1alpha1.AllowanceBucket, st quota.BucketStatus, at time.Time) {
		x.Verified(src, id, b, st, at)
	}
	t.buckets.Gone = func(id quota.BucketID) { x.Gone(src, id) }
	t.buckets.Forecast = h.Forecast
	h.OnForecast(func(id quota.BucketID) { t.bucketQueue.Add(id) })
	end := x.Lead(src, h)
	ctx, cancel := context.WithCancel(t.ctx)
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	h.Watch(t.claimInformer, t.grantInformer)
	return func() {
		end()
		cancel()
		<-done
	}
}

func (t *term) shutdownQueues() {
	t.claimQueue.ShutDown()
	t.settler.Queue.ShutDown()
	t.bucketQueue.ShutDown()
	t.conditionQueue.ShutDown()
	t.objects.Queue.ShutDown()
	t.charger.Queue.ShutDown()
}

// eventRecorder records the engine's Events (a bucket crossing a
// threshold), started when first needed.
func (r *Runner) eventRecorder() record.EventRecorder {
	r.eventsOnce.Do(func() {
		b := record.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.kube.CoreV1().Events("")})
		r.events = b.NewRecorder(r.scheme, corev1.EventSource{Component: "quotaplane-quota-engine"})
	})
	return r.events
}

// triggerSchemas are the OpenAPI schemas of a policy's trigger kind: the
// version it names, to type `trigger` and estimate the cost of its
// expressions, and every version it serves, to refuse a field none has.
// When the kind is not served (yet) or its schema cannot be read the policy
// is judged without types (no estimate, no field check; the cost limit
// still holds at evaluation) and judged again later (status.SchemaState).
func (r *Runner) triggerSchemas(ctx context.Context, tr quotav1alpha1.TriggerResource) (policy.Options, status.SchemaState) {
	log := klog.FromContext(ctx)
	gv, err := schema.ParseGroupVersion(tr.APIVersion)
	if err != nil {
		return policy.Options{}, status.KindNotServed
	}
	mappings, err := r.mapper.RESTMappings(gv.WithKind(tr.Kind).GroupKind())
	if err != nil || len(mappings) == 0 {
		// Looked for afresh next time: a mapper that has read discovery
		// once does not read it again by itself.
		r.mapper.Reset()
		return policy.Options{}, status.KindNotServed
	}
	s, err := r.schemas.Resolve(tr.APIVersion, tr.Kind)
	if err != nil {
		log.V(4).Info("Judging a policy without its trigger's schema", "apiVersion", tr.APIVersion, "kind", tr.Kind, "err", err)
		return policy.Options{}, status.SchemaPending
	}
	o := policy.Options{TriggerSchema: s, ServedSchemas: []*spec.Schema{s}}
	for _, m := range mappings {
		if m.GroupVersionKind.Version == gv.Version {
			continue
		}
		other, err := r.schemas.Resolve(m.GroupVersionKind.GroupVersion().String(), tr.Kind)
		if err != nil {
			// A version whose schema cannot be read may have any field.
			log.V(4).Info("Judging a policy without the schema of one version", "gvk", m.GroupVersionKind, "err", err)
			other = nil
		}
		o.ServedSchemas = append(o.ServedSchemas, other)
	}
	return o, status.SchemaKnown
}
