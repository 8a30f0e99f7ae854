package requests

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/leader"
	"github.com/quotaplane/quotaplane/internal/reconcile"
)

// LeaseName is the Lease, in Options.Namespace, on which replicas elect the
// one that runs the request controller.
const LeaseName = "quotaplane-requests"

// Options configure the request controller.
type Options struct {
	// Namespace holds the Lease; it is created when missing.
	Namespace string
	// Identity names this replica in the Lease.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

var scheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, quotav1alpha1.AddToScheme, rmv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// Start returns a server component that campaigns for the Lease and runs the
// controller while this replica holds it. It returns at once.
func Start(opts Options) func(ctx context.Context, cfg *rest.Config) error {
	return func(ctx context.Context, cfg *rest.Config) error {
		if opts.Namespace == "" || opts.Identity == "" {
			return errors.New("the request controller's leader election needs a namespace and an identity")
		}
		cfg = rest.CopyConfig(cfg)
		cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		cfg = rest.AddUserAgent(cfg, "quotaplane-requests")
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating the request controller's client: %w", err)
		}
		cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("creating the request controller's client: %w", err)
		}
		e := leader.Election{Namespace: opts.Namespace, Lease: LeaseName, Identity: opts.Identity,
			LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("configuring the request controller's leader election: %w", err)
		}
		logger := klog.FromContext(ctx).WithName("requests").WithValues("lease", klog.KRef(opts.Namespace, LeaseName))
		go leader.Campaign(klog.NewContext(ctx, logger), kube, e, "quota request controller", func(ctx context.Context) error {
			return runTerm(ctx, kube, cl)
		})
		return nil
	}
}

// key is a request (namespace and name) or, with rule set, an approval rule.
type key struct {
	rule            bool
	namespace, name string
}

// runTerm is one term of leadership: informers on requests and rules, one
// worker.
func runTerm(ctx context.Context, kube kubernetes.Interface, cl client.WithWatch) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	q := reconcile.NewQueue[key](50*time.Millisecond, 30*time.Second)
	r := &reconciler{
		client:   cl,
		recorder: broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "quotaplane-requests"}),
		now:      time.Now,
	}
	requests := reconcile.NewInformer(cl, &quotav1alpha1.QuotaRequest{}, &quotav1alpha1.QuotaRequestList{}, "", "", 10*time.Hour)
	rules := reconcile.NewInformer(cl, &quotav1alpha1.QuotaApprovalRule{}, &quotav1alpha1.QuotaApprovalRuleList{}, "", "", 10*time.Hour)
	r.rules = rules.GetStore()
	r.requests = requests.GetStore()
	enqueue := func(rule bool) func(obj any) {
		return func(obj any) {
			m, err := reconcile.Meta(obj)
			if err != nil {
				return
			}
			q.Add(key{rule: rule, namespace: m.GetNamespace(), name: m.GetName()})
			if rule { // a rule changed: pending requests may now be approved
				for _, o := range requests.GetStore().List() {
					if qr := o.(*quotav1alpha1.QuotaRequest); qr.Status.State == "" || qr.Status.State == quotav1alpha1.QuotaRequestPending {
						q.Add(key{namespace: qr.Namespace, name: qr.Name})
					}
				}
			}
		}
	}
	for inf, rule := range map[toolscache.SharedIndexInformer]bool{requests: false, rules: true} {
		h := enqueue(rule)
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: h, UpdateFunc: func(_, n any) { h(n) }, DeleteFunc: h,
		}); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer func() { q.ShutDown(); wg.Wait() }()
	wg.Go(func() { requests.RunWithContext(ctx) })
	wg.Go(func() { rules.RunWithContext(ctx) })
	if !toolscache.WaitForCacheSync(ctx.Done(), requests.HasSynced, rules.HasSynced) {
		return nil
	}
	// One worker: requests for one bucket are applied one at a time, each
	// reading the limit the previous one left.
	wg.Go(func() { reconcile.RunRequeue(ctx, q, "quota request", r.reconcile) })
	<-ctx.Done()
	return nil
}
