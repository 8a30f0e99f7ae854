package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapifilters "k8s.io/apiserver/pkg/endpoints/filters"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/util/notfoundhandler"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"

	"github.com/quotaplane/quotaplane/internal/crdinstall"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/peer"
	"github.com/quotaplane/quotaplane/internal/requests"
	"github.com/quotaplane/quotaplane/internal/server/etcd"
	"github.com/quotaplane/quotaplane/internal/server/kubecontrollers"
	"github.com/quotaplane/quotaplane/internal/server/nativeapi"
	"github.com/quotaplane/quotaplane/internal/server/planeserve/cleanup"
	"github.com/quotaplane/quotaplane/internal/server/planeserve/collect"
	"github.com/quotaplane/quotaplane/internal/tenancy"
)

// readyHookName is the post-start hook that installs the CRDs and starts the
// controllers; /readyz fails until it has finished. The upstream controllers
// only start campaigning for their Lease there: readiness never waits for an
// election.
const readyHookName = "quotaplane-crds-and-controllers"

// Server is a created, not yet running, quotaplane server.
type Server struct {
	opts  CompletedOptions
	cfg   completedConfig
	etcd  *etcd.Server
	chain *aggregatorapiserver.APIAggregator
	ready chan struct{}
}

// New creates the API server chain (CRDs → built-in APIs → aggregator).
func (c CompletedConfig) New(ctx context.Context) (s *Server, err error) {
	s = &Server{opts: c.Options, cfg: *c.completedConfig, ready: make(chan struct{})}
	s.etcd = c.etcd
	defer func() {
		if err != nil {
			if c.storage != nil {
				_ = c.storage.Close()
			}
			if c.etcd != nil { // s is nil here: the named result was returned
				c.etcd.Stop()
			}
			c.lock.release()
		}
	}()

	notFound := notfoundhandler.New(c.controlPlane.Generic.Serializer, genericapifilters.NoMuxAndDiscoveryIncompleteKey)
	apiExtensions, err := c.apiExtensions.New(genericapiserver.NewEmptyDelegateWithCustomHandler(notFound))
	if err != nil {
		return nil, fmt.Errorf("creating the CRD server: %w", err)
	}
	crdAPIEnabled := c.apiExtensions.GenericConfig.MergedResourceConfig.ResourceEnabled(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))

	native, err := c.controlPlane.New("quotaplane", apiExtensions.GenericAPIServer)
	if err != nil {
		return nil, fmt.Errorf("creating the built-in API server: %w", err)
	}
	client, err := kubernetes.NewForConfig(c.controlPlane.Generic.LoopbackClientConfig)
	if err != nil {
		return nil, err
	}
	providers, err := c.controlPlane.GenericStorageProviders(client.Discovery())
	if err != nil {
		return nil, fmt.Errorf("creating storage providers: %w", err)
	}
	providers = withWorkloadProviders(providers)
	if err := native.InstallAPIs(providers...); err != nil {
		return nil, fmt.Errorf("installing the built-in APIs: %w", err)
	}
	if !c.Options.CRDStorage {
		groups, err := nativeapi.APIGroups(c.controlPlane.Generic.RESTOptionsGetter, nativeapi.Answered{"quotareviews": c.reviews})
		if err != nil {
			return nil, err
		}
		if err := native.GenericAPIServer.InstallAPIGroups(groups...); err != nil {
			return nil, fmt.Errorf("installing quotaplane's API groups: %w", err)
		}
	}
	s.chain, err = controlplaneapiserver.CreateAggregatorServer(c.aggregator, native.GenericAPIServer,
		apiExtensions.Informers.Apiextensions().V1().CustomResourceDefinitions(), crdAPIEnabled,
		servicePriorities())
	if err != nil {
		return nil, fmt.Errorf("creating the aggregator: %w", err)
	}
	// /metrics also shows the quota state while this replica leads the engine.
	mux := s.chain.GenericAPIServer.Handler.NonGoRestfulMux
	mux.Unregister("/metrics")
	mux.Handle("/metrics", c.Options.QuotaMetrics.Handler(legacyregistry.HandlerWithReset()))
	// Member clusters' webhooks post their reviews here (docs/clusters.md).
	mux.HandlePrefix(members.ReviewPrefix, c.members)
	// A replica whose peer CA the leader does not share cannot get its
	// decisions: it is not ready, and says which files to copy.
	caCheck := &peer.CACheck{}
	if err := s.chain.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck(peer.CACheckName, caCheck.Check)); err != nil {
		return nil, err
	}
	le := c.Options.KubeControllers
	cleaner := &cleanup.Cleaner{Registry: c.planes, Etcd: c.storage, Prefix: c.Options.EtcdPrefix}
	components := append([]Component{
		func(ctx context.Context, loopback *rest.Config) error {
			if err := c.planes.Start(ctx, loopback); err != nil {
				return err
			}
			if err := cleaner.Start(ctx); err != nil {
				return err
			}
			return c.collector.Start(ctx, loopback)
		},
		kubecontrollers.Start(le),
		startPeers(c.Options, c.files, caCheck),
		tenancy.Start(tenancy.Options{Namespace: le.Namespace, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}),
		requests.Start(requests.Options{Namespace: le.Namespace, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}),
	}, c.Components...)
	if c.portal != nil {
		components = append(components, c.portal.Start)
	}
	if err := s.chain.GenericAPIServer.AddPostStartHook(readyHookName, func(hookCtx genericapiserver.PostStartHookContext) error {
		install := crdinstall.Install
		if !c.Options.CRDStorage {
			install = crdinstall.InstallRoles // the kinds are served natively
		}
		if err := install(hookCtx, hookCtx.LoopbackClientConfig); err != nil {
			return err
		}
		for _, start := range components {
			if err := start(hookCtx, hookCtx.LoopbackClientConfig); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// LoopbackConfig is a privileged client configuration for this server.
func (s *Server) LoopbackConfig() *rest.Config {
	return rest.CopyConfig(s.chain.GenericAPIServer.LoopbackClientConfig)
}

// Ready is closed once /readyz succeeds.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// PlaneCollector is the control planes' garbage collector and namespace
// controller (to sweep on demand: benchmarks).
func (s *Server) PlaneCollector() *collect.Collector { return s.cfg.collector }

// Run serves until ctx is done, then stops the API server first and etcd
// last, and releases the data directory. banner, when not nil, receives one
// line once the server is ready.
func (s *Server) Run(ctx context.Context, banner io.Writer) error {
	defer s.cfg.lock.release()
	defer func() {
		if s.etcd != nil {
			s.etcd.Stop()
		}
	}()
	defer func() {
		if s.cfg.storage != nil {
			_ = s.cfg.storage.Close()
		}
	}()
	if err := writeAdminKubeconfig(s.opts, s.cfg.files.CACert, s.cfg.files.AdminCert, s.cfg.files.AdminKey); err != nil {
		return err
	}
	prepared, err := s.chain.PrepareRun()
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- prepared.Run(runCtx) }()

	var etcdErr <-chan error
	if s.etcd != nil {
		etcdErr = s.etcd.Err()
	}
	go s.announceWhenReady(runCtx, banner)
	go trimWhenIdle(runCtx)
	select {
	case err := <-done:
		return err
	case err := <-etcdErr:
		klog.ErrorS(err, "Embedded etcd failed; shutting down")
		cancel()
		<-done
		return fmt.Errorf("embedded etcd failed: %w", err)
	}
}

func (s *Server) announceWhenReady(ctx context.Context, banner io.Writer) {
	cfg := s.LoopbackConfig()
	cfg.Timeout = 2 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		code := 0
		res := client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx)
		res.StatusCode(&code)
		if code != http.StatusOK {
			continue
		}
		if errors.Is(res.Error(), context.Canceled) {
			return
		}
		close(s.ready)
		klog.V(1).InfoS("quotaplane is ready", "after", time.Since(start))
		if banner != nil {
			fmt.Fprintf(banner, "quotaplane is serving at https://%s (ready in %s); try: kubectl --kubeconfig %s api-resources\n",
				s.opts.kubeconfigServerHost(), time.Since(start).Round(time.Millisecond), s.opts.kubeconfigPath())
		}
		return
	}
}

// servicePriorities are the generic control plane's APIService priorities
// and those of apps/v1 and discovery.k8s.io/v1, which serve adds
// (workloads.go, discovery.go).
func servicePriorities() map[schema.GroupVersion]controlplaneapiserver.APIServicePriority {
	p := controlplaneapiserver.DefaultGenericAPIServicePriorities()
	p[appsv1.SchemeGroupVersion] = appsPriority
	p[discoveryv1.SchemeGroupVersion] = discoveryPriority
	return p
}
