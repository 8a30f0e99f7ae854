package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	name := flag.String("name", "", "member name")
	dir := flag.String("data-dir", "", "data directory")
	client := flag.String("listen-client-url", "", "client URL, http://127.0.0.1:port")
	peer := flag.String("listen-peer-url", "", "peer URL, http://127.0.0.1:port")
	cluster := flag.String("initial-cluster", "", "name=peerURL,...")
	state := flag.String("initial-cluster-state", "new", "new or existing")
	restore := flag.String("restore-snapshot", "", "a snapshot to restore into --data-dir first (which must not exist), as etcdutl snapshot restore --bump-revision --mark-compacted does")
	flag.Parse()
	if *restore != "" {
		// Revisions bumped and compacted, as Kubernetes' restore procedure
		// asks: the API servers' watches never see a revision go back.
		err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: *restore, Name: *name, OutputDataDir: *dir,
			PeerURLs: []string{*peer}, InitialCluster: *cluster, InitialClusterToken: token, RevisionBump: 1_000_000, MarkCompacted: true})
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdmember: restoring", *restore, ":", err)
			os.Exit(1)
		}
	}
	if err := run(*name, *dir, *client, *peer, *cluster, *state); err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		os.Exit(1)
	}
}

const token = "quotaplane-test"

func run(name, dir, client, peer, cluster, state string) error {
	cu, err := url.Parse(client)
	if err != nil {
		return fmt.Errorf("--listen-client-url: %w", err)
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return fmt.Errorf("--listen-peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster, cfg.ClusterState = cluster, state
	cfg.InitialClusterToken = token
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Elections as on a small cluster on one machine: a killed leader is
	// replaced within a couple of seconds.
	cfg.TickMs, cfg.ElectionMs = 100, 1000
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("member %s was not ready within 2 minutes", name)
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		return nil
	case err := <-e.Err():
		return err
	}
}
