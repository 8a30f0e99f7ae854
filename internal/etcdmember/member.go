package etcdmember

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/klog/v2"
)

// Options are a member's settings, named as etcd's flags.
type Options struct {
	Name, DataDir                                string
	ListenClientURLs, AdvertiseClientURLs        []string
	ListenPeerURLs, InitialAdvertisePeerURLs     []string
	ListenMetricsURLs                            []string
	InitialCluster, InitialClusterState, Token   string
	CertFile, KeyFile, TrustedCAFile             string
	ClientCertAuth                               bool
	PeerCertFile, PeerKeyFile, PeerTrustedCAFile string
	PeerClientCertAuth                           bool
	HeartbeatInterval, ElectionTimeout           uint
	QuotaBackendBytes                            int64
	AutoCompactionMode, AutoCompactionRetention  string
	LogLevel                                     string
	SnapshotCount                                uint64
	UnsafeNoFsync                                bool
}

// NewOptions returns etcd's defaults.
func NewOptions() *Options {
	d := embed.NewConfig()
	return &Options{
		Name: d.Name, DataDir: "",
		ListenClientURLs: []string{"http://localhost:2379"}, ListenPeerURLs: []string{"http://localhost:2380"},
		InitialClusterState: embed.ClusterStateFlagNew, Token: "etcd-cluster",
		HeartbeatInterval: d.TickMs, ElectionTimeout: d.ElectionMs,
		AutoCompactionMode: "periodic", LogLevel: "info", SnapshotCount: d.SnapshotCount,
	}
}

// AddFlags registers the flags, as etcd names them.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Name, "name", o.Name, "Human-readable name of this member; --initial-cluster names it.")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Path to the data directory. Required.")
	fs.StringSliceVar(&o.ListenClientURLs, "listen-client-urls", o.ListenClientURLs, "URLs to listen on for client traffic.")
	fs.StringSliceVar(&o.AdvertiseClientURLs, "advertise-client-urls", o.AdvertiseClientURLs, "This member's client URLs as the rest of the cluster and its clients reach them. Default: --listen-client-urls.")
	fs.StringSliceVar(&o.ListenPeerURLs, "listen-peer-urls", o.ListenPeerURLs, "URLs to listen on for peer traffic.")
	fs.StringSliceVar(&o.InitialAdvertisePeerURLs, "initial-advertise-peer-urls", o.InitialAdvertisePeerURLs, "This member's peer URLs as the other members reach them. Default: --listen-peer-urls.")
	fs.StringSliceVar(&o.ListenMetricsURLs, "listen-metrics-urls", o.ListenMetricsURLs, "URLs to also serve /metrics and /health on, without client TLS.")
	fs.StringVar(&o.InitialCluster, "initial-cluster", o.InitialCluster, "Every member at bootstrap: name=peerURL,... Default: this member alone.")
	fs.StringVar(&o.InitialClusterState, "initial-cluster-state", o.InitialClusterState, "new (bootstrapping) or existing (joining a running cluster).")
	fs.StringVar(&o.Token, "initial-cluster-token", o.Token, "Cluster token at bootstrap, the same for every member.")
	fs.StringVar(&o.CertFile, "cert-file", o.CertFile, "Client serving certificate.")
	fs.StringVar(&o.KeyFile, "key-file", o.KeyFile, "Client serving certificate's key.")
	fs.StringVar(&o.TrustedCAFile, "trusted-ca-file", o.TrustedCAFile, "CA of the client certificates accepted.")
	fs.BoolVar(&o.ClientCertAuth, "client-cert-auth", o.ClientCertAuth, "Require a client certificate signed by --trusted-ca-file.")
	fs.StringVar(&o.PeerCertFile, "peer-cert-file", o.PeerCertFile, "Peer certificate (server and client).")
	fs.StringVar(&o.PeerKeyFile, "peer-key-file", o.PeerKeyFile, "Peer certificate's key.")
	fs.StringVar(&o.PeerTrustedCAFile, "peer-trusted-ca-file", o.PeerTrustedCAFile, "CA of the peer certificates accepted.")
	fs.BoolVar(&o.PeerClientCertAuth, "peer-client-cert-auth", o.PeerClientCertAuth, "Require peers' certificates signed by --peer-trusted-ca-file.")
	fs.UintVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "Time (ms) of a heartbeat interval.")
	fs.UintVar(&o.ElectionTimeout, "election-timeout", o.ElectionTimeout, "Time (ms) for an election to time out.")
	fs.Int64Var(&o.QuotaBackendBytes, "quota-backend-bytes", o.QuotaBackendBytes, "Raise alarms when the backend size exceeds this (0: etcd's default, 2 GiB).")
	fs.StringVar(&o.AutoCompactionMode, "auto-compaction-mode", o.AutoCompactionMode, "periodic or revision (quotaplane serve compacts through its API server too).")
	fs.StringVar(&o.AutoCompactionRetention, "auto-compaction-retention", o.AutoCompactionRetention, "Auto compaction retention (e.g. 1h, or a revision count); empty: off.")
	fs.Uint64Var(&o.SnapshotCount, "snapshot-count", o.SnapshotCount, "Committed transactions that trigger a snapshot to disk.")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn, error, panic or fatal.")
	fs.BoolVar(&o.UnsafeNoFsync, "unsafe-no-fsync", o.UnsafeNoFsync, "Skip fsync: data may be lost on a crash. Only for tests.")
}

// Config is the embedded etcd's configuration for o, checked.
func (o *Options) Config() (*embed.Config, error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("--data-dir is required: the directory of this member's data (etcd writes its WAL and snapshots there)")
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = o.Name, o.DataDir
	var err error
	if cfg.ListenClientUrls, err = urls("--listen-client-urls", o.ListenClientURLs); err != nil {
		return nil, err
	}
	if cfg.AdvertiseClientUrls, err = urls("--advertise-client-urls", orDefault(o.AdvertiseClientURLs, o.ListenClientURLs)); err != nil {
		return nil, err
	}
	if cfg.ListenPeerUrls, err = urls("--listen-peer-urls", o.ListenPeerURLs); err != nil {
		return nil, err
	}
	if cfg.AdvertisePeerUrls, err = urls("--initial-advertise-peer-urls", orDefault(o.InitialAdvertisePeerURLs, o.ListenPeerURLs)); err != nil {
		return nil, err
	}
	if cfg.ListenMetricsUrls, err = urls("--listen-metrics-urls", o.ListenMetricsURLs); err != nil {
		return nil, err
	}
	cfg.InitialCluster = o.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(o.Name)
	}
	switch o.InitialClusterState {
	case embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting:
		cfg.ClusterState = o.InitialClusterState
	default:
		return nil, fmt.Errorf("--initial-cluster-state %q: want new (bootstrapping a cluster) or existing (joining one)", o.InitialClusterState)
	}
	cfg.InitialClusterToken = o.Token
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile, cfg.ClientTLSInfo.TrustedCAFile = o.CertFile, o.KeyFile, o.TrustedCAFile
	cfg.ClientTLSInfo.ClientCertAuth = o.ClientCertAuth
	cfg.PeerTLSInfo.CertFile, cfg.PeerTLSInfo.KeyFile, cfg.PeerTLSInfo.TrustedCAFile = o.PeerCertFile, o.PeerKeyFile, o.PeerTrustedCAFile
	cfg.PeerTLSInfo.ClientCertAuth = o.PeerClientCertAuth
	cfg.TickMs, cfg.ElectionMs = o.HeartbeatInterval, o.ElectionTimeout
	cfg.QuotaBackendBytes = o.QuotaBackendBytes
	cfg.AutoCompactionMode, cfg.AutoCompactionRetention = o.AutoCompactionMode, o.AutoCompactionRetention
	cfg.SnapshotCount = o.SnapshotCount
	cfg.LogLevel = o.LogLevel
	cfg.UnsafeNoFsync = o.UnsafeNoFsync
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd's configuration: %w", err)
	}
	return cfg, nil
}

// Run starts the member and serves until ctx ends or etcd fails.
func Run(ctx context.Context, o *Options) error {
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd member %s: %w", o.Name, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		klog.InfoS("etcd member ready", "name", o.Name, "clientURLs", strings.Join(o.AdvertiseClientURLs, ","))
	case err := <-e.Err():
		return err
	case <-ctx.Done():
		return nil
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("etcd member %s did not join its cluster within 10 minutes: check that --initial-cluster names every member at a peer URL each reaches", o.Name)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}

func orDefault(v, d []string) []string {
	if len(v) == 0 {
		return d
	}
	return v
}

func urls(flag string, ss []string) ([]url.URL, error) {
	var out []url.URL
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s %q: want http:// or https://host:port", flag, s)
		}
		out = append(out, *u)
	}
	return out, nil
}
