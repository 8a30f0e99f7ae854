package kubecontrollers

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	quotageneric "k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	resourcequotacontroller "k8s.io/kubernetes/pkg/controller/resourcequota"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	quotacore "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"

	"github.com/quotaplane/quotaplane/internal/reconcile"
)

const (
	resync = 12 * time.Hour
	// discoveryPeriod is how often the garbage collector and the quota
	// controller look for new resources, such as a newly installed CRD.
	discoveryPeriod = 15 * time.Second
	// stopTimeout bounds the wait for one term's controllers to stop before
	// this replica campaigns again.
	stopTimeout = 30 * time.Second
)

// servedByGenericControlPlane lists the quota evaluators with special logic
// whose resources serve serves: Pods and PersistentVolumeClaims (added to
// the generic control plane's core group). Services and DRA claims are not
// served, so their evaluators stay off (they would otherwise watch resources
// that do not exist).
func servedByGenericControlPlane(gvr schema.GroupVersionResource) bool {
	return gvr.Group == "" && (gvr.Resource == "pods" || gvr.Resource == "persistentvolumeclaims")
}

// run runs the controllers against the API server reached through cfg until
// ctx is done, and returns once they have stopped (or after stopTimeout).
func run(ctx context.Context, cfg *rest.Config) error {
	logger := klog.FromContext(ctx)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the controllers' client: %w", err)
	}
	metadataClient, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the controllers' metadata client: %w", err)
	}
	// Lean copies: the controllers never read managed fields, which are a
	// fifth of a stored object's decoded size (docs/scale.md).
	shared := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(reconcile.Lean))
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(metadataClient, resync, metadatainformer.WithTransform(reconcile.Lean))
	objectOrMetadata := informerfactory.NewInformerFactory(shared, metadataInformers)
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery()))
	informersStarted := make(chan struct{})

	// Garbage collection of ownerReferences: background, foreground and orphan.
	graph := garbagecollector.NewDependencyGraphBuilder(ctx, metadataClient, restMapper,
		garbagecollector.DefaultIgnoredResources(), objectOrMetadata, informersStarted)
	gc, err := garbagecollector.NewComposedGarbageCollector(ctx, client, metadataClient, restMapper, graph)
	if err != nil {
		return fmt.Errorf("creating the garbage collector: %w", err)
	}

	// Namespace deletion: contents first, then the namespace.
	namespaces := namespacecontroller.NewNamespaceController(ctx, client, metadataClient,
		client.Discovery().ServerPreferredNamespacedResources,
		shared.Core().V1().Namespaces(), 5*time.Minute, corev1.FinalizerKubernetes)

	// The built-in ResourceQuota's usage controller.
	evaluators, err := quotacore.NewEvaluators(quotageneric.ListerFuncForResourceFunc(shared.ForResource), shared, servedByGenericControlPlane)
	if err != nil {
		return fmt.Errorf("creating the resource quota evaluators: %w", err)
	}
	quotaConfig := quotageneric.NewConfiguration(evaluators, quotainstall.DefaultIgnoredResources())
	quotaDiscovery := client.Discovery().ServerPreferredNamespacedResources
	quotas, err := resourcequotacontroller.NewController(ctx, &resourcequotacontroller.ControllerOptions{
		QuotaClient:               client.CoreV1(),
		ResourceQuotaInformer:     shared.Core().V1().ResourceQuotas(),
		ResyncPeriod:              controller.StaticResyncPeriodFunc(5 * time.Minute),
		InformerFactory:           objectOrMetadata,
		ReplenishmentResyncPeriod: controller.StaticResyncPeriodFunc(resync),
		DiscoveryFunc:             quotaDiscovery,
		IgnoredResourcesFunc:      quotaConfig.IgnoredResources,
		InformersStarted:          informersStarted,
		Registry:                  quotageneric.NewRegistry(quotaConfig.Evaluators()),
		UpdateFilter:              quotainstall.DefaultUpdateFilter(),
	})
	if err != nil {
		return fmt.Errorf("creating the resource quota controller: %w", err)
	}

	// Every namespace's "default" ServiceAccount, which the ServiceAccount
	// admission plugin gives a Pod that names none.
	serviceAccounts, err := serviceaccountcontroller.NewServiceAccountsController(logger, shared.Core().V1().ServiceAccounts(),
		shared.Core().V1().Namespaces(), client, serviceaccountcontroller.DefaultServiceAccountsControllerOptions())
	if err != nil {
		return fmt.Errorf("creating the service account controller: %w", err)
	}

	shared.Start(ctx.Done())
	metadataInformers.Start(ctx.Done())
	close(informersStarted)

	var wg sync.WaitGroup
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { restMapper.Reset() }, discoveryPeriod) })
	wg.Go(func() { gc.Run(ctx, 20, discoveryPeriod*4) })
	wg.Go(func() { gc.Sync(ctx, client.Discovery(), discoveryPeriod) })
	wg.Go(func() { namespaces.Run(ctx, 10) })
	wg.Go(func() { quotas.Run(ctx, 10) })
	wg.Go(func() { serviceAccounts.Run(ctx, 1) })
	wg.Go(func() { quotas.Sync(ctx, quotaDiscovery, discoveryPeriod) })
	logger.V(2).Info("Started the garbage collector, namespace and resource quota controllers")
	<-ctx.Done()

	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		shared.Shutdown()
		metadataInformers.Shutdown()
		close(stopped)
	}()
	select {
	case <-stopped:
		logger.V(2).Info("Stopped the garbage collector, namespace and resource quota controllers")
	case <-time.After(stopTimeout):
		logger.Info("The controllers did not stop in time; going on without waiting for them", "timeout", stopTimeout)
	}
	return nil
}
