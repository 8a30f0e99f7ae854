package testserver

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/server/planeserve/collect"
)

// Options configure a test server.
type Options struct {
	// DataDir is reused when set (to test restarts); otherwise a temporary
	// directory is created and removed by Stop.
	DataDir string
	// Components run in-process, as with serve.
	Components []server.Component
	// Engine, when set, runs the quota engine in-process with these options
	// and enforces ClaimCreationPolicies at admission, exactly as serve does.
	Engine *engine.Options
	// CRDStorage serves quotaplane's kinds as CRDs, as serve did before it
	// served them natively (to compare the two, and to test the upgrade).
	CRDStorage bool
	// Faults, when set with Engine, are injected into the engine's
	// decisions (route.HandleOptions): a *Faults lets the test switch them
	// while the server runs.
	Faults route.Faults
	// Fsync keeps etcd's fsync on. Off by default: tests stop servers
	// gracefully, and fsync makes them slow on shared disks.
	Fsync bool
}

// Server is a running in-process quotaplane.
type Server struct {
	// DataDir is the server's data directory.
	DataDir string
	// Kubeconfig is the path of the admin kubeconfig the server wrote.
	Kubeconfig string
	// Config is an admin client configuration read from Kubeconfig.
	Config *rest.Config
	// StartupTime is how long the server took to become ready.
	StartupTime time.Duration
	// EtcdServers are the endpoints of the server's etcd.
	EtcdServers []string
	// Handle is the in-process engine's handle for admission, and Metrics
	// what it shows operators; nil without an engine.
	Handle  *route.Handle
	Metrics *observe.Exporter
	// PlaneCollector is the planes' garbage collector (to sweep on demand).
	PlaneCollector *collect.Collector

	removeDir bool
	cancel    context.CancelFunc
	done      chan error
}

// Quiet sends the server's logs to io.Discard unless -v was given to go test.
func Quiet() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if os.Getenv("QUOTAPLANE_TEST_LOGS") == "" {
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
}

// Start starts a server and waits until /readyz succeeds.
func Start(o Options) (*Server, error) {
	s := &Server{DataDir: o.DataDir}
	if s.DataDir == "" {
		dir, err := os.MkdirTemp("", "quotaplane-test-")
		if err != nil {
			return nil, err
		}
		s.DataDir, s.removeDir = dir, true
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on a free loopback port: %w", err)
	}
	opts := server.NewOptions()
	opts.DataDir = s.DataDir
	opts.Listener = listener
	opts.EtcdUnsafeNoFsync = !o.Fsync
	opts.CRDStorage = o.CRDStorage
	components := o.Components
	if o.Engine != nil {
		eo := *o.Engine
		eo.Handle = route.NewHandleFor(route.HandleOptions{Faults: o.Faults})
		if eo.Identity == "" {
			eo.Identity = engine.StableIdentity("serve", s.DataDir)
		}
		if eo.Exporter == nil {
			eo.Exporter = observe.NewExporter(observe.DefaultMetricsOptions())
		}
		s.Handle, s.Metrics = eo.Handle, eo.Exporter
		opts.QuotaMetrics = eo.Exporter
		if eo.SystemNamespace == "" {
			eo.SystemNamespace = engine.DefaultOptions().SystemNamespace
		}
		opts.QuotaEngine, opts.SystemNamespace = eo.Handle, eo.SystemNamespace
		opts.Identity = eo.Identity // the engine's Lease names it: whether this replica leads
		if eo.ExemptNamespaces != nil {
			opts.ExemptNamespaces = eo.ExemptNamespaces
		}
		components = append(components, server.QuotaComponents(eo)...)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	began := time.Now()
	completed, err := opts.Complete()
	if err != nil {
		cancel()
		return nil, err
	}
	if errs := completed.Validate(); len(errs) > 0 {
		cancel()
		return nil, utilerrors.NewAggregate(errs)
	}
	cfg, err := server.NewConfig(ctx, completed)
	if err != nil {
		cancel()
		listener.Close()
		return nil, err
	}
	cfg.Components = components
	s.EtcdServers = cfg.EtcdServers
	srv, err := cfg.Complete().New(ctx)
	if err != nil {
		cancel()
		listener.Close()
		return nil, err
	}
	s.PlaneCollector = srv.PlaneCollector()
	s.done = make(chan error, 1)
	go func() { s.done <- srv.Run(ctx, nil) }()

	select {
	case <-srv.Ready():
	case err := <-s.done:
		cancel()
		return nil, fmt.Errorf("server stopped before it was ready: %w", err)
	case <-time.After(2 * time.Minute):
		_ = s.Stop()
		return nil, errors.New("server was not ready within 2 minutes")
	}
	s.StartupTime = time.Since(began)
	s.Kubeconfig = filepath.Join(s.DataDir, "admin.kubeconfig")
	s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("reading %s: %w", s.Kubeconfig, err)
	}
	s.Config.QPS, s.Config.Burst = 2000, 4000
	return s, nil
}

// Stop shuts the server down in order and waits until it has released its
// data directory. A temporary data directory is removed unless keep is set
// through StopKeep.
func (s *Server) Stop() error {
	err := s.StopKeep()
	if s.removeDir {
		_ = os.RemoveAll(s.DataDir)
	}
	return err
}

// StopKeep shuts the server down but keeps its data directory, for restarts.
func (s *Server) StopKeep() error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	case <-time.After(time.Minute):
		return errors.New("server did not stop within a minute")
	}
}

// Main runs a test package's tests against one server started with o,
// quietly, and stops it after them; *srv is set before any test runs. Use it
// as the package's TestMain: func TestMain(m *testing.M) { testserver.Main(m, &srv, opts) }.
func Main(m interface{ Run() int }, srv **Server, o Options) {
	Quiet()
	s, err := Start(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting quotaplane:", err)
		os.Exit(1)
	}
	*srv = s
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping quotaplane:", err)
		code = 1
	}
	os.Exit(code)
}

// EtcdClient is a client of the server's etcd with the credentials serve
// recorded in its data directory (the embedded etcd accepts only those).
func (s *Server) EtcdClient() (*clientv3.Client, error) {
	loc, err := formats.ReadEtcdFile(s.DataDir)
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if loc.CAFile != "" || loc.CertFile != "" {
		tlsConfig, err = transport.TLSInfo{TrustedCAFile: loc.CAFile, CertFile: loc.CertFile, KeyFile: loc.KeyFile}.ClientConfig()
		if err != nil {
			return nil, err
		}
	}
	return clientv3.New(clientv3.Config{Endpoints: loc.Servers, TLS: tlsConfig, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
}
