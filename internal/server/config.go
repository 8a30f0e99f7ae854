package server

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/controlplane"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	cpoptions "k8s.io/kubernetes/pkg/controlplane/apiserver/options"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"

	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/leader"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/portal"
	"github.com/quotaplane/quotaplane/internal/server/etcd"
	"github.com/quotaplane/quotaplane/internal/server/memberserve"
	"github.com/quotaplane/quotaplane/internal/server/nativeapi"
	"github.com/quotaplane/quotaplane/internal/server/pki"
	"github.com/quotaplane/quotaplane/internal/server/planeserve"
	"github.com/quotaplane/quotaplane/internal/server/planeserve/collect"
	"github.com/quotaplane/quotaplane/internal/server/quotareview"
)

// Component is started once the API server serves and the quota CRDs are
// established; it runs until ctx is done. Start must return once started.
type Component func(ctx context.Context, loopback *rest.Config) error

// Config is everything needed to create the server. Build it with NewConfig.
type Config struct {
	Options CompletedOptions
	// Components run in-process next to the API server.
	Components []Component

	lock  *dataDirLock
	files pki.Files
	// listener is the API's port, opened first (nil when Options gave one).
	listener net.Listener
	etcd     *etcd.Server // nil with an external etcd
	// storage is the quota engine's own etcd client (admission's grants).
	storage *clientv3.Client
	// planes knows the control planes of Organizations and Projects.
	planes *planeserve.Registry
	// collector is the planes' garbage collector and namespace controller.
	collector *collect.Collector
	// members decides member clusters' reviews (quotaplane webhook).
	members *memberserve.Reviewer
	// reviews answers QuotaReviews.
	reviews *quotareview.REST
	// portal serves /portal/ (nil with --no-portal).
	portal *portal.Portal
	// EtcdServers are the etcd endpoints the server uses (the embedded one's
	// when nothing else was given).
	EtcdServers []string

	aggregator    *aggregatorapiserver.Config
	controlPlane  *controlplaneapiserver.Config
	apiExtensions *apiextensionsapiserver.Config
}

// CompletedConfig can only be produced by Config.Complete.
type CompletedConfig struct {
	*completedConfig
}

type completedConfig struct {
	Options    CompletedOptions
	Components []Component

	lock      *dataDirLock
	files     pki.Files
	etcd      *etcd.Server
	storage   *clientv3.Client
	planes    *planeserve.Registry
	collector *collect.Collector
	members   *memberserve.Reviewer
	reviews   *quotareview.REST
	portal    *portal.Portal

	aggregator    aggregatorapiserver.CompletedConfig
	controlPlane  controlplaneapiserver.CompletedConfig
	apiExtensions apiextensionsapiserver.CompletedConfig
}

// NewConfig locks the data directory, creates the certificates on first
// start, starts the embedded etcd (the API server configuration needs a
// serving etcd) and configures the API server. The API does not serve yet;
// call Abort when the server will not be run.
// etcdProbeTimeout bounds how long serve waits for an external etcd to
// answer before it says so and stops.
const etcdProbeTimeout = 10 * time.Second

// probeEtcd asks the external etcd for its status, so that one that does
// not answer is one clear line, not a storage factory's timeout.
func probeEtcd(ctx context.Context, opts CompletedOptions) error {
	servers := strings.Join(opts.EtcdServers, ",")
	what := fmt.Sprintf("start it, or correct --etcd-servers (%s)", servers)
	if opts.EtcdCAFile != "" || opts.EtcdCertFile != "" {
		what += " and --etcd-cafile, --etcd-certfile, --etcd-keyfile"
	}
	tlsConfig, err := opts.etcdClientTLS()
	if err != nil {
		return fmt.Errorf("the etcd client certificates: %w; %s", err, what)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: opts.EtcdServers, TLS: tlsConfig, DialTimeout: etcdProbeTimeout, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd at %s: %w; %s", servers, err, what)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, etcdProbeTimeout)
	defer cancel()
	var last error
	for _, ep := range opts.EtcdServers {
		if _, last = cli.Status(ctx, ep); last == nil {
			return nil
		}
	}
	return fmt.Errorf("etcd at %s did not answer within %s (%v); %s", servers, etcdProbeTimeout, last, what)
}

// deleteCollectionWorkers delete the items of one collection in parallel.
const deleteCollectionWorkers = 8

func NewConfig(ctx context.Context, opts CompletedOptions) (c *Config, err error) {
	lock, err := lockDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	// Every failure below returns a nil Config: what was started is stopped
	// through this one.
	started := &Config{Options: opts, lock: lock}
	c = started
	defer func() {
		if err != nil {
			started.Abort()
		}
	}()
	// The port first: a port in use (another API server — kind, k3s,
	// minikube — on 6443) is the most common first failure, and is said
	// before anything else starts.
	if opts.Listener == nil {
		ln, err := listen(opts.bindIP, opts.SecurePort)
		if err != nil {
			return nil, err
		}
		started.listener = ln
		opts.Listener, started.Options.Listener = ln, ln
	}

	var extraIPs []net.IP
	if !opts.bindIP.IsUnspecified() && !opts.bindIP.IsLoopback() {
		extraIPs = append(extraIPs, opts.bindIP)
	}
	var dnsNames []string
	if h, err := os.Hostname(); err == nil {
		dnsNames = append(dnsNames, h)
	}
	// The peer listener is reached at its advertised address: its
	// certificate names it.
	if host, _, err := net.SplitHostPort(opts.PeerAdvertiseAddress); err == nil && host != "" {
		if ip := net.ParseIP(host); ip != nil {
			if !ip.IsLoopback() && !ip.Equal(opts.bindIP) {
				extraIPs = append(extraIPs, ip)
			}
		} else {
			dnsNames = append(dnsNames, host)
		}
	}
	for _, san := range opts.TLSSANs {
		if ip := net.ParseIP(san); ip != nil {
			extraIPs = append(extraIPs, ip)
		} else {
			dnsNames = append(dnsNames, san)
		}
	}
	if opts.SharedPKIDir != "" {
		if err := pki.InstallShared(opts.SharedPKIDir, filepath.Join(opts.DataDir, "pki")); err != nil {
			return nil, err
		}
	}
	if c.files, err = pki.Ensure(filepath.Join(opts.DataDir, "pki"), extraIPs, dnsNames); err != nil {
		return nil, fmt.Errorf("preparing certificates: %w", err)
	}

	servers := opts.EtcdServers
	if len(servers) == 0 {
		// The embedded etcd accepts serve alone: mutual TLS on loopback,
		// with a CA of its own and certificates kept in the data directory
		// (readable by its owner only). docs/operations.md.
		etcdFiles, err := pki.EnsureEtcd(filepath.Join(opts.DataDir, "pki", "etcd"))
		if err != nil {
			return nil, fmt.Errorf("preparing the embedded etcd's certificates: %w", err)
		}
		opts.EtcdCAFile, opts.EtcdCertFile, opts.EtcdKeyFile = etcdFiles.CACert, etcdFiles.ClientCert, etcdFiles.ClientKey
		c.Options = opts
		etcdConfig, err := etcd.Options{Dir: filepath.Join(opts.DataDir, "etcd"), UnsafeNoFsync: opts.EtcdUnsafeNoFsync,
			ClientTLS: &etcd.ClientTLS{CertFile: etcdFiles.ServerCert, KeyFile: etcdFiles.ServerKey, ClientCAFile: etcdFiles.CACert}}.Complete()
		if err != nil {
			return nil, err
		}
		if c.etcd, err = etcdConfig.Start(ctx); err != nil {
			return nil, err
		}
		servers = []string{c.etcd.ClientURL()}
	}
	c.EtcdServers = servers
	if len(opts.EtcdServers) > 0 {
		if err := probeEtcd(ctx, opts); err != nil {
			return nil, err
		}
	}
	// quotaplane verify --data-dir reads admission's journal from here.
	if err := formats.WriteEtcdFile(opts.DataDir, formats.EtcdLocation{Servers: servers, Prefix: opts.EtcdPrefix,
		CAFile: opts.EtcdCAFile, CertFile: opts.EtcdCertFile, KeyFile: opts.EtcdKeyFile}); err != nil {
		return nil, err
	}

	// The engine writes admission's grants straight into etcd, fenced by its
	// ledger (docs/admission.md), and the control planes' cleaner removes a
	// deleted owner's plane data (docs/control-planes.md): one client.
	tlsConfig, err := opts.etcdClientTLS()
	if err != nil {
		return nil, err
	}
	c.storage, err = clientv3.New(clientv3.Config{Endpoints: servers, TLS: tlsConfig, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd: %w", err)
	}
	engineStorage := &route.Storage{Client: c.storage, Prefix: opts.EtcdPrefix}
	if opts.QuotaEngine != nil {
		opts.QuotaEngine.UseStorage(engineStorage)
	}
	c.planes = planeserve.NewRegistry(planes.SystemNamespace)
	planeStorage := &planeserve.Storage{SystemNamespace: planes.SystemNamespace, Registry: c.planes}
	le := opts.KubeControllers
	c.collector = &collect.Collector{Registry: c.planes, Etcd: c.storage, Prefix: opts.EtcdPrefix,
		Election: leader.Election{Namespace: le.Namespace, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod}}
	planeStorage.OnCollect(c.collector.Collect)

	ko := cpoptions.NewOptions()
	c.members = &memberserve.Reviewer{Trusted: sets.New(opts.TrustedMemberClusters...)}
	c.reviews = &quotareview.REST{}
	link := requestLink(opts.PortalURL)
	registerQuotaAdmission(ko.Admission.GenericAdmission, opts.QuotaEngine, &opts.Options, func(p *charge.Charger) {
		c.members.Use(p)
		c.reviews.Use(p)
		p.SetIncreaseLink(link)
	})
	if !opts.NoPortal {
		c.portal = portal.New(portal.Options{SystemNamespace: opts.SystemNamespace})
	}
	ko.Admission.GenericAdmission.DefaultOffPlugins = defaultOffAdmissionPlugins()
	ko.Admission.GenericAdmission.Decorators = append(ko.Admission.GenericAdmission.Decorators, planeserve.AdmissionDecorator(c.planes))
	ko.GenericServerRunOptions.RequestTimeout = opts.RequestTimeout
	ko.SecureServing.BindAddress = opts.bindIP
	ko.SecureServing.BindPort = opts.SecurePort
	ko.SecureServing.Listener = opts.Listener
	ko.SecureServing.ServerCert.CertKey.CertFile = c.files.ServingCert
	ko.SecureServing.ServerCert.CertKey.KeyFile = c.files.ServingKey
	ko.Authentication.ClientCert.ClientCA = c.files.CACert
	ko.Authentication.ServiceAccounts.Issuers = []string{"https://kubernetes.default.svc"}
	ko.Authentication.ServiceAccounts.KeyFiles = []string{c.files.ServiceAcctKey}
	var tokens *tokenGetter
	ko.Authentication.ServiceAccounts.OptionalTokenGetter, tokens = tokenGetterFor()
	ko.ServiceAccountSigningKeyFile = c.files.ServiceAcctKey
	ko.Authorization.Modes = []string{"RBAC"}
	ko.Etcd.StorageConfig.Transport.ServerList = servers
	ko.Etcd.StorageConfig.Transport.TrustedCAFile = opts.EtcdCAFile
	ko.Etcd.StorageConfig.Transport.CertFile = opts.EtcdCertFile
	ko.Etcd.StorageConfig.Transport.KeyFile = opts.EtcdKeyFile
	ko.Etcd.StorageConfig.Prefix = opts.EtcdPrefix
	// A collection is deleted by this many workers, not kube-apiserver's one:
	// deleting 1,000 organizations at once took over the 60 s request
	// timeout on a busy 2-core machine one by one (docs/benchmarks.md §6).
	ko.Etcd.DeleteCollectionWorkers = deleteCollectionWorkers

	completed, err := ko.Complete(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("completing API server options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("invalid API server options: %w", utilerrors.NewAggregate(errs))
	}

	// quotaplane's own kinds are registered in the API server's scheme
	// before its configuration (the OpenAPI namer, the storage factory)
	// reads the scheme — with CRD storage too, where they are unused: the
	// scheme is the process's (legacyscheme), and registering them later,
	// for a second server of one process, would write its maps while the
	// first one decodes with them (a fatal concurrent map access CI found
	// in test/integration/nativeapi).
	nativeapi.Register()
	openAPIDefinitions := generatedopenapi.GetOpenAPIDefinitions
	if !opts.CRDStorage {
		openAPIDefinitions = nativeapi.OpenAPIDefinitions(openAPIDefinitions)
	}
	genericConfig, versionedInformers, storageFactory, err := controlplaneapiserver.BuildGenericConfig(
		completed,
		[]*runtime.Scheme{legacyscheme.Scheme, apiextensionsapiserver.Scheme, aggregatorscheme.Scheme},
		controlplane.DefaultGenericAPIResourceConfigSource(),
		openAPIDefinitions,
	)
	if err != nil {
		return nil, fmt.Errorf("building the API server configuration: %w", err)
	}
	if tokens.live, err = kubernetes.NewForConfig(genericConfig.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("the loopback client for service-account tokens: %w", err)
	}
	if !opts.CRDStorage {
		if err := nativeapi.ConfigureStorage(storageFactory); err != nil {
			return nil, err
		}
		// Upgrading from a serve that installed them as CRDs: their
		// objects stay where they are and are read natively.
		if err := nativeapi.DropObsoleteCRDs(ctx, c.storage, opts.EtcdPrefix); err != nil {
			return nil, err
		}
	}
	genericConfig.EffectiveVersion = stampedVersion{genericConfig.EffectiveVersion}
	// The API server's identity Lease (kube-system, apiserver-…) is named
	// from this replica's identity: upstream names it from the host name,
	// which replicas on one host share — each then overwrote the others'
	// Lease and logged "Failed to update lease" every ten seconds.
	genericConfig.APIServerID = apiServerID(le.Identity)
	serviceResolver := webhook.NewDefaultServiceResolver()
	// The claim guard reads the objects of control planes through their
	// URLs, as the server itself (plugininit.NewPlanesInitializer).
	kubeAPIs, pluginInitializer, err := controlplaneapiserver.CreateConfig(completed, genericConfig, versionedInformers, storageFactory, serviceResolver,
		[]admission.PluginInitializer{plugininit.NewPlanesInitializer(genericConfig.LoopbackClientConfig)})
	if err != nil {
		return nil, fmt.Errorf("configuring the built-in APIs: %w", err)
	}
	kubeAPIs.Generic.RESTOptionsGetter = planeStorage.OptionsGetter(kubeAPIs.Generic.RESTOptionsGetter)
	if !opts.CRDStorage {
		// Admission's claims are encoded as the storage layer encodes
		// every ResourceClaim (docs/native-storage.md).
		if engineStorage.Claims, err = nativeapi.NewClaimCodec(kubeAPIs.Generic.RESTOptionsGetter); err != nil {
			return nil, err
		}
	}
	// RBAC's escalation checks and SubjectAccessReviews decide in a plane
	// as the plane does; admission plugins keep the root's authorizer
	// (captured above), so a plane's administrator charges no one else.
	// A member cluster's review is authorized by the root's RBAC: verb
	// review on the cluster (docs/clusters.md).
	c.members.Authorizer = kubeAPIs.Generic.Authorization.Authorizer
	planeAuthorizer := &planeserve.Authorizer{Root: kubeAPIs.Generic.Authorization.Authorizer, Registry: c.planes}
	// A review asks RBAC of each object as its request would be asked (in
	// a plane, the plane's), and of a claim's consumer as admission does.
	c.reviews.Authorizer, c.reviews.RootAuthorizer = planeAuthorizer, kubeAPIs.Generic.Authorization.Authorizer
	c.reviews.Loopback = kubeAPIs.Generic.LoopbackClientConfig
	kubeAPIs.Generic.Authorization.Authorizer = planeAuthorizer
	c.controlPlane = kubeAPIs
	authInfoResolver := webhook.NewDefaultAuthenticationInfoResolverWrapper(kubeAPIs.ProxyTransport, kubeAPIs.Generic.EgressSelector, kubeAPIs.Generic.LoopbackClientConfig, kubeAPIs.Generic.TracerProvider)
	c.apiExtensions, err = controlplaneapiserver.CreateAPIExtensionsConfig(*kubeAPIs.Generic, kubeAPIs.VersionedInformers, pluginInitializer, completed, 3, serviceResolver, authInfoResolver)
	if err != nil {
		return nil, fmt.Errorf("configuring CustomResourceDefinitions: %w", err)
	}
	c.aggregator, err = controlplaneapiserver.CreateAggregatorConfig(*kubeAPIs.Generic, completed, kubeAPIs.VersionedInformers, serviceResolver, kubeAPIs.ProxyTransport, kubeAPIs.Extra.PeerProxy, pluginInitializer)
	if err != nil {
		return nil, fmt.Errorf("configuring the aggregator: %w", err)
	}
	c.apiExtensions.GenericConfig.RESTOptionsGetter = planeStorage.OptionsGetter(c.apiExtensions.GenericConfig.RESTOptionsGetter)
	c.apiExtensions.ExtraConfig.CRDRESTOptionsGetter = planeStorage.OptionsGetter(c.apiExtensions.ExtraConfig.CRDRESTOptionsGetter)
	c.aggregator.ExtraConfig.DisableRemoteAvailableConditionController = true
	c.aggregator.GenericConfig.RESTOptionsGetter = planeStorage.OptionsGetter(c.aggregator.GenericConfig.RESTOptionsGetter)
	if opts.QuotaEngine != nil {
		c.aggregator.GenericConfig.BuildHandlerChainFunc = reportCreateOutcomes(opts.QuotaEngine, c.aggregator.GenericConfig.BuildHandlerChainFunc)
	}
	// Requests to control planes: the path within the plane before every
	// filter, the plane's owner resolved after authorization.
	chain := c.aggregator.GenericConfig.BuildHandlerChainFunc
	c.aggregator.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, cfg *genericapiserver.Config) http.Handler {
		served := planeserve.Outer(chain(planeserve.Inner(c.planes, h), cfg))
		if c.portal != nil {
			// The pages are public; the portal authenticates each of its
			// own API calls with the user's token (internal/portal).
			return c.portal.Wrap(served)
		}
		return served
	}
	c.aggregator.GenericConfig.Authorization.Authorizer = planeAuthorizer
	return c, nil
}

// etcdClientTLS is the TLS configuration of the quota engine's etcd client,
// read from the files the API server's storage uses; nil when none is given,
// as the storage does.
func (o CompletedOptions) etcdClientTLS() (*tls.Config, error) {
	if o.EtcdCAFile == "" && o.EtcdCertFile == "" && o.EtcdKeyFile == "" {
		return nil, nil
	}
	info := transport.TLSInfo{TrustedCAFile: o.EtcdCAFile, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the etcd TLS files (--etcd-cafile %q, --etcd-certfile %q, --etcd-keyfile %q): %w", o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile, err)
	}
	return cfg, nil
}

// Complete fills in the rest of the configuration.
func (c *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{
		Options:       c.Options,
		Components:    c.Components,
		lock:          c.lock,
		files:         c.files,
		etcd:          c.etcd,
		storage:       c.storage,
		planes:        c.planes,
		collector:     c.collector,
		members:       c.members,
		reviews:       c.reviews,
		portal:        c.portal,
		aggregator:    c.aggregator.Complete(),
		controlPlane:  c.controlPlane.Complete(),
		apiExtensions: c.apiExtensions.Complete(),
	}}
}

// Abort stops etcd and releases the data directory when the server is never run.
func (c *Config) Abort() {
	if c.listener != nil {
		_ = c.listener.Close()
		c.listener = nil
	}
	if c.storage != nil {
		_ = c.storage.Close()
		c.storage = nil
	}
	if c.etcd != nil {
		c.etcd.Stop()
		c.etcd = nil
	}
	c.lock.release()
}

// listen opens the API's port, saying in one line what to do when it cannot.
func listen(ip net.IP, port int) (net.Listener, error) {
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("port %d (%s) is already in use, by another API server (kind, k3s, minikube?) or an earlier quotaplane serve: stop it, or choose another port with --secure-port", port, addr)
	case errors.Is(err, syscall.EACCES):
		return nil, fmt.Errorf("may not listen on port %d (%s): ports below 1024 need privileges; choose another with --secure-port", port, addr)
	case err != nil:
		return nil, fmt.Errorf("cannot listen on %s (--bind-address, --secure-port): %w", addr, err)
	}
	return ln, nil
}

// apiServerID is the API server identity of the replica with this replica
// identity, in upstream's form (apiserver-<base32 of a hash>).
func apiServerID(identity string) string {
	h := sha256.Sum256([]byte(identity + "kube-apiserver"))
	return "apiserver-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:16]))
}
