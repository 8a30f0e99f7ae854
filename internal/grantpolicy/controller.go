package grantpolicy

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/grantpolicy/statemetrics"
	"github.com/quotaplane/quotaplane/internal/grantpolicy/triggerwatch"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// scheme holds the quota kinds, for the client and for events.
var scheme = runtime.NewScheme()

func init() {
	if err := quotav1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := rmv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// Index names of the grant informer.
const (
	// indexTrigger: the grants of one policy for one trigger object
	// (triggerIndexValue of their labels).
	indexTrigger = "trigger"
	// indexPolicy: the grants of one policy (its label value).
	indexPolicy = "policy"
)

// controller is one term of the grant engine: everything it holds is
// rebuilt from the API server when a term begins.
type controller struct {
	opts     Options
	kube     kubernetes.Interface
	client   client.WithWatch
	dynamic  dynamic.Interface
	mapper   *restmapper.DeferredDiscoveryRESTMapper
	schemas  *triggerschema.Resolver
	recorder record.EventRecorder
	events   record.EventBroadcaster
	queue    workqueue.TypedRateLimitingInterface[key]

	policies      cache.SharedIndexInformer
	grants        cache.SharedIndexInformer
	registrations cache.SharedIndexInformer
	namespaces    cache.SharedIndexInformer
	// crds tells policies waiting for their trigger kind to look again.
	crds     cache.SharedIndexInformer
	triggers *triggerwatch.Set

	mu sync.Mutex
	// active are the Ready, enabled policies, by name.
	active map[string]*activePolicy
	// pending are the grants that cannot be made yet, by policy and key.
	pending map[string]map[key]problem
	// heldSince says since when each pending grant is held back, and
	// whether the policy has had an event about it.
	heldSince map[key]heldSince
	// waitingFor are the keys waiting for a namespace to exist.
	waitingFor map[string]map[key]struct{}
	// reasons is each policy's Ready reason, for the metric.
	reasons map[string]string
	// kindAttempts counts, per policy, the looks for a trigger kind not
	// served yet.
	kindAttempts map[string]int
	// schemaAttempts counts, per policy, the looks for the schema of a
	// served kind.
	schemaAttempts map[string]int
	// lastMapperReset bounds discovery refreshes.
	lastMapperReset time.Time
}

func newController(cfg *rest.Config, opts Options) (*controller, error) {
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cl, err := client.NewWithWatch(jsonCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(jsonCfg)
	if err != nil {
		return nil, err
	}
	c := &controller{opts: opts, kube: kube, client: cl, dynamic: dyn,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())),
		schemas: triggerschema.New(kube.Discovery(), 0),
		active:  map[string]*activePolicy{}, pending: map[string]map[key]problem{}, heldSince: map[key]heldSince{},
		waitingFor: map[string]map[key]struct{}{}, reasons: map[string]string{}, kindAttempts: map[string]int{}, schemaAttempts: map[string]int{}}
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[key](20*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[key]{Name: "grantpolicy"})
	c.events = record.NewBroadcaster()
	c.recorder = c.events.NewRecorder(scheme, corev1.EventSource{Component: "quotaplane-grant-policies"})

	c.policies = c.informer(&quotav1alpha1.GrantCreationPolicy{}, &quotav1alpha1.GrantCreationPolicyList{}, "")
	c.grants = c.informer(&quotav1alpha1.ResourceGrant{}, &quotav1alpha1.ResourceGrantList{}, quotav1alpha1.GrantPolicyLabel)
	c.registrations = c.informer(&quotav1alpha1.ResourceRegistration{}, &quotav1alpha1.ResourceRegistrationList{}, "")
	c.namespaces = informers.NewSharedInformerFactory(kube, 0).Core().V1().Namespaces().Informer()
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.crds = metadatainformer.NewFilteredMetadataInformer(md, apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"), "", 0, cache.Indexers{}, nil).Informer()
	if err := c.grants.AddIndexers(cache.Indexers{indexTrigger: grantTriggerIndex, indexPolicy: grantPolicyIndex}); err != nil {
		return nil, err
	}
	c.triggers = triggerwatch.New(dyn, c.triggerChanged, func(n int) { triggerWatches.Set(float64(n)) })
	if err := c.addHandlers(); err != nil {
		return nil, err
	}
	return c, nil
}

// informer lists and watches one quota kind; labelSelector, when set,
// limits it to the objects carrying that label.
func (c *controller) informer(obj client.Object, list client.ObjectList, labelSelector string) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = labelSelector
			l := list.DeepCopyObject().(client.ObjectList)
			if err := c.client.List(ctx, l, &client.ListOptions{Raw: &opts}); err != nil {
				return nil, err
			}
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = labelSelector
			return c.client.Watch(ctx, list.DeepCopyObject().(client.ObjectList), &client.ListOptions{Raw: &opts})
		},
	}
	return reconcile.LeanInformer(cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}))
}

func grantTriggerIndex(obj any) ([]string, error) {
	g, ok := obj.(*quotav1alpha1.ResourceGrant)
	if !ok {
		return nil, nil
	}
	l := g.Labels
	if l[quotav1alpha1.GrantPolicyLabel] == "" || l[quotav1alpha1.GrantPolicyLabelTriggerName] == "" {
		return nil, nil
	}
	return []string{l[quotav1alpha1.GrantPolicyLabel] + "/" + l[quotav1alpha1.GrantPolicyLabelTriggerNamespace] + "/" + l[quotav1alpha1.GrantPolicyLabelTriggerName]}, nil
}

func grantPolicyIndex(obj any) ([]string, error) {
	g, ok := obj.(*quotav1alpha1.ResourceGrant)
	if !ok || g.Labels[quotav1alpha1.GrantPolicyLabel] == "" {
		return nil, nil
	}
	return []string{g.Labels[quotav1alpha1.GrantPolicyLabel]}, nil
}

// addHandlers turns changes into keys: a policy, registration or grant
// change enqueues what it may change; nothing branches on the event type.
func (c *controller) addHandlers() error {
	onPolicy := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			c.queue.Add(policyKey(k))
		}
	}
	if _, err := c.policies.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPolicy, UpdateFunc: func(_, o any) { onPolicy(o) }, DeleteFunc: onPolicy,
	}); err != nil {
		return err
	}
	// A registration turning Active (or not) may change whether a policy
	// is Ready; policies are few.
	onRegistration := func(any) {
		for _, k := range c.policies.GetStore().ListKeys() {
			c.queue.Add(policyKey(k))
		}
	}
	if _, err := c.registrations.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onRegistration, UpdateFunc: func(_, o any) { onRegistration(o) }, DeleteFunc: onRegistration,
	}); err != nil {
		return err
	}
	// A grant changed or deleted by someone else is put back.
	onGrant := func(obj any) {
		obj = reconcile.Unwrap(obj)
		g, ok := obj.(*quotav1alpha1.ResourceGrant)
		if !ok {
			return
		}
		if k, ok := grantKey(g); ok {
			c.queue.Add(k)
		}
	}
	if _, err := c.grants.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onGrant, UpdateFunc: func(_, o any) { onGrant(o) }, DeleteFunc: onGrant,
	}); err != nil {
		return err
	}
	// A CRD installed or changed: policies waiting for their kind look again.
	onCRD := func(any) {
		c.mu.Lock()
		waiting := make([]string, 0, len(c.kindAttempts))
		for name := range c.kindAttempts {
			waiting = append(waiting, name)
			c.kindAttempts[name] = 0 // look again soon: the kind may be served in a moment
		}
		c.lastMapperReset = time.Time{}
		c.mu.Unlock()
		for _, name := range waiting {
			c.queue.Add(policyKey(name))
		}
	}
	if _, err := c.crds.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onCRD, UpdateFunc: func(_, o any) { onCRD(o) },
	}); err != nil {
		return err
	}
	// A namespace appearing releases the grants waiting for it.
	onNamespace := func(obj any) {
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			return
		}
		c.mu.Lock()
		waiting := c.waitingFor[ns.Name]
		keys := make([]key, 0, len(waiting))
		for k := range waiting {
			keys = append(keys, k)
		}
		c.mu.Unlock()
		for _, k := range keys {
			c.queue.Add(k)
		}
	}
	_, err := c.namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onNamespace, UpdateFunc: func(_, o any) { onNamespace(o) },
	})
	return err
}

// grantKey is the key a grant was made for, from its annotations.
func grantKey(g *quotav1alpha1.ResourceGrant) (key, bool) {
	a := g.Annotations
	if a[quotav1alpha1.GrantPolicyAnnotation] == "" || a[quotav1alpha1.GrantPolicyAnnotationTriggerName] == "" {
		return key{}, false
	}
	return key{policy: a[quotav1alpha1.GrantPolicyAnnotation], namespace: a[quotav1alpha1.GrantPolicyAnnotationTriggerNamespace], name: a[quotav1alpha1.GrantPolicyAnnotationTriggerName]}, true
}

// triggerChanged is called by the shared watch of a trigger kind for each
// object change, with the policies using that kind.
func (c *controller) triggerChanged(policies []string, namespace, name string) {
	for _, p := range policies {
		c.queue.Add(key{policy: p, namespace: namespace, name: name})
	}
}

// grantPolicies are the names of the policies that grants are labelled
// with.
func (c *controller) grantPolicies() []string {
	seen := map[string]bool{}
	var out []string
	for _, obj := range c.grants.GetStore().List() {
		g := obj.(*quotav1alpha1.ResourceGrant)
		p := g.Annotations[quotav1alpha1.GrantPolicyAnnotation]
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// run runs one term until ctx is done.
func (c *controller) run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	c.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	defer c.events.Shutdown()
	defer c.triggers.StopAll()
	defer c.queue.ShutDown()

	informers := []cache.SharedIndexInformer{c.policies, c.grants, c.registrations, c.namespaces, c.crds}
	for _, inf := range informers {
		go inf.RunWithContext(ctx)
	}
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	defer c.opts.Metrics.Publish(statemetrics.Writer(c.policies.GetStore()))()
	// Grants whose policy went away while no engine ran are found by label.
	for _, p := range c.grantPolicies() {
		c.queue.Add(policyKey(p))
	}
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() { reconcile.RunRequeue(ctx, c.queue, "grant policy", c.reconcile) })
	}
	logger.V(2).Info("Grant engine started", "workers", c.opts.Workers)
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	policiesByReason.Reset()
	problems.Reset()
	return nil
}

// reconcile syncs one policy or one trigger object, and times it.
func (c *controller) reconcile(ctx context.Context, k key) (time.Duration, error) {
	began := time.Now()
	var err error
	kind := "trigger"
	if k.isPolicy() {
		kind = "policy"
		err = c.syncPolicy(ctx, k.policy)
	} else {
		err = c.syncTrigger(ctx, k)
	}
	reconciles.WithLabelValues(kind, result(err)).Observe(time.Since(began).Seconds())
	return 0, err
}

// errRetry asks for the key to be tried again later, after a problem that
// was already reported.
var errRetry = errors.New("retry later")
