package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

// Options configure the embedded etcd.
type Options struct {
	// Dir holds etcd's data; created when missing.
	Dir string
	// UnsafeNoFsync skips fsync. Only for tests: a crash may lose writes.
	UnsafeNoFsync bool
	// QuotaBackendBytes is the size limit of the database; 0 means 8 GiB.
	QuotaBackendBytes int64
	// ClientTLS, when set, makes etcd serve its clients and its peer port
	// over HTTPS and accept only clients with a certificate signed by
	// ClientTLS.ClientCAFile (the serving certificate must also allow client
	// authentication: etcd dials its own peer port with it).
	ClientTLS *ClientTLS
}

// ClientTLS is etcd's serving certificate and the CA of its clients.
type ClientTLS struct {
	CertFile, KeyFile string
	ClientCAFile      string
}

// Config is an embedded etcd whose loopback ports are chosen but which is not
// started yet, so that the API server can be configured with its address.
type Config struct {
	Options
	clientURL, peerURL url.URL
}

// Server is a running embedded etcd.
type Server struct {
	etcd      *embed.Etcd
	clientURL string
}

// Complete chooses free loopback ports for etcd.
func (o Options) Complete() (*Config, error) {
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if o.ClientTLS != nil {
		scheme = "https"
	}
	return &Config{
		Options:   o,
		clientURL: url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", clientPort)},
		peerURL:   url.URL{Scheme: scheme, Host: fmt.Sprintf("127.0.0.1:%d", peerPort)},
	}, nil
}

// ClientURL is the address clients will reach etcd at.
func (c *Config) ClientURL() string { return c.clientURL.String() }

// portAttempts bounds how often Start chooses new ports when one it chose
// was taken between choosing and listening (another process on the machine
// may bind any free port in that window).
const portAttempts = 5

// Start starts etcd and waits until it serves, or until ctx is done or a
// minute has passed. A chosen port taken in the meantime is chosen again.
func (c *Config) Start(ctx context.Context) (*Server, error) {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the etcd directory %s: %w", c.Dir, err)
	}
	for attempt := 1; ; attempt++ {
		s, err := c.start(ctx)
		if err == nil || !addressInUse(err) || attempt == portAttempts {
			return s, err
		}
		klog.InfoS("An embedded etcd port was taken before etcd listened on it; choosing others", "client", c.clientURL.Host, "peer", c.peerURL.Host, "err", err)
		fresh, cerr := c.Options.Complete()
		if cerr != nil {
			return nil, cerr
		}
		c.clientURL, c.peerURL = fresh.clientURL, fresh.peerURL
	}
}

// addressInUse reports whether err is a listener's "address already in use".
func addressInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func (c *Config) start(ctx context.Context) (*Server, error) {
	o, clientURL, peerURL := c.Options, c.clientURL, c.peerURL

	cfg := embed.NewConfig()
	cfg.Name = "quotaplane"
	cfg.Dir = o.Dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = o.UnsafeNoFsync
	if t := o.ClientTLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.ClientCAFile, ClientCertAuth: true}
		// The peer port too: nothing but this etcd itself can talk to it.
		cfg.PeerTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.ClientCAFile, ClientCertAuth: true}
	}
	cfg.QuotaBackendBytes = o.QuotaBackendBytes
	if cfg.QuotaBackendBytes == 0 {
		cfg.QuotaBackendBytes = 8 << 30
	}
	cfg.LogLevel = "fatal" // etcd logs an error for every listener it closes on shutdown; real failures reach Err()
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}
	// The API server compacts etcd itself (--etcd-compaction-interval).

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting embedded etcd in %s: %w", o.Dir, err)
	}
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s was not ready within a minute", o.Dir)
	}
	klog.V(2).InfoS("Embedded etcd is ready", "dir", o.Dir, "client", clientURL.String())
	return &Server{etcd: e, clientURL: clientURL.String()}, nil
}

// ClientURL is the address clients reach etcd at.
func (s *Server) ClientURL() string { return s.clientURL }

// Err reports a fatal etcd error while running.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Stop stops etcd and waits until it has released its files.
func (s *Server) Stop() {
	s.etcd.Close()
	<-s.etcd.Server.StopNotify()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port for etcd: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
