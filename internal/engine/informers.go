package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/hierarchy"
	"github.com/quotaplane/quotaplane/internal/engine/status"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// readContentTypes: protobuf where the quota kinds are served natively
// (serve: lists and watches decode several times faster), JSON where they
// are CRDs (another cluster). Request bodies stay JSON, which both accept.
const readContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

func newRESTClient(cfg *rest.Config, scheme *runtime.Scheme) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	gv := quotav1alpha1.SchemeGroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, readContentTypes
	return rest.RESTClientFor(c)
}

// quorumInformer is an informer whose initial list is a quorum read
// (resourceVersion ""), never served from a watch cache: started after the
// ledger is stamped, its first view includes every write made before.
func quorumInformer(client *rest.RESTClient, codec runtime.ParameterCodec, resource string, obj runtime.Object, newList func() runtime.Object) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.ResourceVersion == "0" {
				opts.ResourceVersion = ""
			}
			list := newList()
			err := client.Get().Resource(resource).VersionedParams(&opts, codec).Timeout(time.Minute).Do(ctx).Into(list)
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", resource, err)
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return client.Get().Resource(resource).VersionedParams(&opts, codec).Watch(ctx)
		},
	}
	return reconcile.LeanInformer(toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{}))
}

// stored reads an object of type T from an informer's store.
func stored[T any](inf toolscache.SharedIndexInformer, key string) (T, bool, error) {
	var zero T
	obj, exists, err := inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return zero, false, err
	}
	o, ok := obj.(T)
	if !ok {
		return zero, false, fmt.Errorf("the cache holds a %T under %s", obj, key)
	}
	return o, true, nil
}

// handle adds the handler funcs for objects of type T to inf and tracks its
// sync; a delete handler gets the last state known of a missed delete.
func handle[T any](inf toolscache.SharedIndexInformer, synced *[]toolscache.InformerSynced, add, update, del func(T)) error {
	var h toolscache.ResourceEventHandlerFuncs
	if add != nil {
		h.AddFunc = func(obj any) {
			if o, ok := obj.(T); ok {
				add(o)
			}
		}
	}
	if update != nil {
		h.UpdateFunc = func(_, obj any) {
			if o, ok := obj.(T); ok {
				update(o)
			}
		}
	}
	if del != nil {
		h.DeleteFunc = func(obj any) {
			if o, ok := reconcile.Unwrap(obj).(T); ok {
				del(o)
			}
		}
	}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return err
	}
	*synced = append(*synced, reg.HasSynced)
	return nil
}

func (t *term) startInformers(ctx context.Context) error {
	codec := runtime.NewParameterCodec(t.r.scheme)
	rc := t.r.rest
	t.regInformer = quorumInformer(rc, codec, "resourceregistrations", &quotav1alpha1.ResourceRegistration{}, func() runtime.Object { return &quotav1alpha1.ResourceRegistrationList{} })
	t.grantInformer = quorumInformer(rc, codec, "resourcegrants", &quotav1alpha1.ResourceGrant{}, func() runtime.Object { return &quotav1alpha1.ResourceGrantList{} })
	t.claimInformer = quorumInformer(rc, codec, "resourceclaims", &quotav1alpha1.ResourceClaim{}, func() runtime.Object { return &quotav1alpha1.ResourceClaimList{} })
	t.bucketInformer = quorumInformer(rc, codec, "allowancebuckets", &quotav1alpha1.AllowanceBucket{}, func() runtime.Object { return &quotav1alpha1.AllowanceBucketList{} })
	if err := t.bucketInformer.AddIndexers(toolscache.Indexers{status.IndexBucketName: status.BucketNameIndex}); err != nil {
		return err
	}
	t.policyInformer = quorumInformer(rc, codec, "claimcreationpolicies", &quotav1alpha1.ClaimCreationPolicy{}, func() runtime.Object { return &quotav1alpha1.ClaimCreationPolicyList{} })
	t.buckets.Buckets = t.bucketInformer
	t.cache.SetClaimLookup(func(k string) bool {
		_, exists, _ := t.claimInformer.GetStore().GetByKey(k)
		return exists
	})

	// The state is rebuilt only once every handler has received every
	// object of its informer's first list: an informer's HasSynced says
	// only that its store has them, while handlers run on goroutines of
	// their own. Deciding before a handler has restored every granted claim
	// would decide against room that is taken.
	var synced []toolscache.InformerSynced
	policyChanged := func(cp *quotav1alpha1.ClaimCreationPolicy) {
		t.conditionQueue.Add(status.Key{Kind: status.KindPolicy, Name: cp.Name})
		t.charger.Queue.Add(cp.Name)
	}
	if err := handle(t.policyInformer, &synced, policyChanged, policyChanged, nil); err != nil {
		return err
	}
	regChanged := func(r *quotav1alpha1.ResourceRegistration) {
		t.cache.RegistrationChanged(r)
		t.enqueueAllPolicies()
	}
	regDeleted := func(r *quotav1alpha1.ResourceRegistration) {
		t.cache.RegistrationDeleted(r.Name)
		t.enqueueAllPolicies()
	}
	if err := handle(t.regInformer, &synced, regChanged, regChanged, regDeleted); err != nil {
		return err
	}
	grantChanged := func(g *quotav1alpha1.ResourceGrant) {
		t.fresh.observed(g.ResourceVersion)
		if t.cache.GrantChanged(g) {
			go t.settler.SettleBudgetHolds() // the grant may have settled its budget hold
		}
	}
	grantDeleted := func(g *quotav1alpha1.ResourceGrant) {
		t.fresh.observed(g.ResourceVersion)
		if t.cache.GrantDeleted(g) {
			go t.settler.SettleBudgetHolds()
		}
	}
	grantsAdded := func(gs []*quotav1alpha1.ResourceGrant) {
		for _, g := range gs {
			t.fresh.observed(g.ResourceVersion)
		}
		if t.cache.GrantsAdded(gs) {
			go t.settler.SettleBudgetHolds()
		}
	}
	firstGrants := &firstList[*quotav1alpha1.ResourceGrant]{add: grantsAdded}
	if err := handleFirst(t.grantInformer, &synced, firstGrants, grantChanged, grantChanged, grantDeleted); err != nil {
		return err
	}
	firstClaims := &firstList[*quotav1alpha1.ResourceClaim]{add: t.claimsAdded}
	if err := handleFirst(t.claimInformer, &synced, firstClaims, t.claimAdded, t.claimUpdated, t.claimDeleted); err != nil {
		return err
	}
	// A bucket object changed by someone else is put back.
	if err := handle(t.bucketInformer, &synced, nil, t.bucketObjectChanged, t.bucketObjectChanged); err != nil {
		return err
	}
	if err := t.grantInformer.AddIndexers(toolscache.Indexers{indexGrantConsumer: grantConsumerIndex}); err != nil {
		return err
	}
	t.consumers = newConsumerDirectory(t.cache, t.r.opts.Parents, t.consumerChanged)
	consumers, err := hierarchy.Watch(ctx, t.r.opts.Parents, existenceKinds(), t.r.kube.Discovery(), t.r.metadata, t.consumers)
	if err != nil {
		return err
	}
	synced = append(synced, consumers...)
	for _, inf := range []toolscache.SharedIndexInformer{t.regInformer, t.grantInformer, t.claimInformer, t.bucketInformer, t.policyInformer} {
		go inf.RunWithContext(ctx)
	}
	// A kind installed or changed has its policies judged again against
	// its schema (a field they read may not exist).
	crds := reconcile.LeanInformer(metadatainformer.NewFilteredMetadataInformer(t.r.metadata, crdResource, metav1.NamespaceAll, 0, toolscache.Indexers{}, nil).Informer())
	if _, err := crds.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.kindsChanged,
		UpdateFunc: func(_, obj any) { t.kindsChanged(obj) },
	}); err != nil {
		return err
	}
	go crds.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	// Every grant and claim of the first lists is gathered: add them.
	firstGrants.flush()
	firstClaims.flush()

	t.fresh.observed(t.grantInformer.LastSyncResourceVersion())
	return nil
}

// claimsAdded learns the claims of the claim informer's first list at once
// (cache.Cache.ClaimsAdded), as claimAdded learns one.
func (t *term) claimsAdded(cls []*quotav1alpha1.ResourceClaim) {
	for _, c := range cls {
		t.objects.Observe(t.ctx, c)
		if namesLegacyBucket(c) {
			t.claimQueue.Add(string(c.UID))
		}
	}
	for _, uid := range t.cache.ClaimsAdded(cls) {
		t.claimQueue.Add(uid)
	}
}

// firstList gathers the objects of an informer's first list so that they
// are added at once: claims with their seals checked in parallel, the maps
// sized for them (a million claims added one by one took three times as
// long). Any later event adds what was gathered first, so events keep their
// order.
type firstList[T any] struct {
	mu    sync.Mutex
	items []T
	added atomic.Bool
	add   func([]T)
}

// gather keeps o for later and reports true, unless the list was added.
func (f *firstList[T]) gather(o T) bool {
	if f.added.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.added.Load() {
		return false
	}
	f.items = append(f.items, o)
	return true
}

// flush adds what was gathered, once.
func (f *firstList[T]) flush() {
	if f.added.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.added.Load() {
		return
	}
	f.add(f.items)
	f.items = nil
	f.added.Store(true)
}

// handleFirst is handle for an informer whose first list is gathered in
// first; later events go through add, update and del once first is flushed.
func handleFirst[T any](inf toolscache.SharedIndexInformer, synced *[]toolscache.InformerSynced, first *firstList[T], add, update, del func(T)) error {
	reg, err := inf.AddEventHandler(firstHandler(first, add, update, del))
	if err != nil {
		return err
	}
	*synced = append(*synced, reg.HasSynced)
	return nil
}

func firstHandler[T any](first *firstList[T], add, update, del func(T)) toolscache.ResourceEventHandlerDetailedFuncs {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			o, ok := obj.(T)
			if !ok || (initial && first.gather(o)) {
				return
			}
			first.flush()
			add(o)
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				first.flush()
				update(o)
			}
		},
		DeleteFunc: func(obj any) {
			if o, ok := reconcile.Unwrap(obj).(T); ok {
				first.flush()
				del(o)
			}
		},
	}
}

// claimAdded learns a claim (cache.Cache.ClaimAdded), ties it to its object
// when the garbage collector cannot, and writes its status when due.
func (t *term) claimAdded(c *quotav1alpha1.ResourceClaim) {
	t.objects.Observe(t.ctx, c)
	if t.cache.ClaimAdded(c) || namesLegacyBucket(c) {
		t.claimQueue.Add(string(c.UID))
	}
}

// namesLegacyBucket: the claim's status names a bucket by the name an older
// quotaplane gave it; the decision is written again with today's name.
func namesLegacyBucket(c *quotav1alpha1.ResourceClaim) bool {
	for _, a := range c.Status.Allocations {
		if a.AllocatingBucket != "" && !quota.IsBucketName(a.AllocatingBucket) {
			return true
		}
	}
	return false
}

// claimUpdated only matters when the stored status drifted from the
// decision (someone edited it): the decision is written again.
func (t *term) claimUpdated(c *quotav1alpha1.ResourceClaim) {
	if !t.cache.Tracks(string(c.UID)) {
		t.claimAdded(c)
		return
	}
	t.objects.Observe(t.ctx, c) // its owner may have been removed
	t.claimQueue.Add(string(c.UID))
}

func (t *term) claimDeleted(c *quotav1alpha1.ResourceClaim) {
	t.objects.Forget(c)
	t.cache.ClaimDeleted(c)
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// kindsChanged judges every policy again against what is served now, when
// the CustomResourceDefinition obj changed.
func (t *term) kindsChanged(obj any) {
	if m, err := reconcile.Meta(obj); err == nil {
		if group, ok := kinds.CRDGroup(m.GetName()); ok {
			t.r.schemas.InvalidateGroup(group)
		}
	}
	t.r.mapper.Reset()
	t.enqueueAllPolicies()
	for _, k := range t.regInformer.GetStore().ListKeys() {
		key := status.Key{Kind: status.KindRegistration, Name: k}
		t.conditionQueue.Add(key)
		// Discovery lists a new CRD's group seconds after the CRD is
		// established: look again then, not only at the registration's
		// ever longer retries.
		for _, d := range crdDiscoveryLag {
			t.conditionQueue.AddAfter(key, d)
		}
	}
}

// crdDiscoveryLag are the delays after a CRD changes at which registrations
// are judged again.
var crdDiscoveryLag = []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}

// enqueueAllPolicies re-validates every policy (their literal resource types
// must be registered).
func (t *term) enqueueAllPolicies() {
	for _, k := range t.policyInformer.GetStore().ListKeys() {
		t.conditionQueue.Add(status.Key{Kind: status.KindPolicy, Name: k})
	}
}

// bucketObjectChanged checks a bucket object that changed, after the same
// delay as the engine's own changes: its own writes come back here too, and
// must not start the next write at once.
func (t *term) bucketObjectChanged(b *quotav1alpha1.AllowanceBucket) {
	t.bucketQueue.AddAfter(bucketIDOf(b), bucketWriteDelay)
}

// enqueueAllBuckets checks every bucket the engine has and every bucket
// object that exists, so that stale objects are removed.
func (t *term) enqueueAllBuckets() {
	ids := t.cache.BucketIDs()
	for _, id := range ids {
		t.bucketQueue.Add(id)
	}
	for _, obj := range t.bucketInformer.GetStore().List() {
		if b, ok := obj.(*quotav1alpha1.AllowanceBucket); ok {
			t.bucketObjectChanged(b)
		}
	}
	enginemetrics.Buckets.Set(float64(len(ids)))
}

// decideLoop decides whenever something changed, records new grants in the
// ledger, and hands the results to the writers.
func (t *term) decideLoop(ctx context.Context) error {
	t.cache.Notify()
	resync := time.NewTicker(time.Minute)
	defer resync.Stop()
	flush := time.NewTicker(ledgerFlushPeriod)
	defer flush.Stop()
	for {
		force := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.cache.Changed():
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

// decideOnce decides, then records new grants in the ledger before any is
// written to a claim. Removing grants already written rides along with the
// next record, or is flushed when force is set.
func (t *term) decideOnce(ctx context.Context, force bool) error {
	if t.cache.WindowsDue(t.r.now()) {
		// A grant's window started or ended by this leader's clock: the
		// new phase is recorded in the ledger before any claim is decided
		// against the limit it changes (docs/exactly-once.md).
		if err := t.committer.RecordLedger(ctx); err != nil {
			return err
		}
		t.cache.ApplyWindows()
	}
	d := t.cache.Decide(force)
	if d.RecordLedger {
		if err := t.committer.RecordLedger(ctx); err != nil {
			return err
		}
	}
	for _, ch := range d.Changed {
		t.claimQueue.Add(ch.UID)
	}
	for _, id := range d.Buckets {
		// Coalesced: a bucket that changes on every create is written at
		// most once per bucketWriteDelay, showing every change up to then.
		t.bucketQueue.AddAfter(id, bucketWriteDelay)
	}
	for _, uid := range d.Grants {
		t.conditionQueue.Add(status.Key{Kind: status.KindGrant, Name: uid})
	}
	for _, n := range d.Registrations {
		t.conditionQueue.Add(status.Key{Kind: status.KindRegistration, Name: n})
	}
	return nil
}

func bucketIDOf(b *quotav1alpha1.AllowanceBucket) quota.BucketID {
	return quota.BucketID{
		Consumer:     convert.ConsumerID(b.Spec.ConsumerRef),
		ResourceType: string(b.Spec.ResourceType),
		Dims:         convert.Dimensions(b.Spec.Dimensions).Key(),
	}
}

// indexGrantConsumer indexes grants by the consumer they name (not those
// that select by label).
const indexGrantConsumer = "consumer"

func grantConsumerIndex(obj any) ([]string, error) {
	g, ok := obj.(*quotav1alpha1.ResourceGrant)
	if !ok || g.Spec.ConsumerSelector != nil {
		return nil, nil
	}
	return []string{convert.ConsumerID(g.Spec.ConsumerRef).String()}, nil
}

// consumerChanged queues the condition of every grant naming a consumer
// that appeared or went.
func (t *term) consumerChanged(id quota.ConsumerID) {
	objs, err := t.grantInformer.GetIndexer().ByIndex(indexGrantConsumer, id.String())
	if err != nil {
		return
	}
	for _, o := range objs {
		if g, ok := o.(*quotav1alpha1.ResourceGrant); ok {
			t.conditionQueue.Add(status.Key{Kind: status.KindGrant, Name: string(g.UID)})
		}
	}
}
