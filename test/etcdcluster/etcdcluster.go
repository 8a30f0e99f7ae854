package etcdcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// Cluster is an etcd cluster whose members run as separate processes on
// loopback (test/etcdcluster/etcdmember), for serve replicas to share.
type Cluster struct {
	t       testing.TB
	bin     string
	Members []*Member
}

// Member is one member's process.
type Member struct {
	Name, Dir           string
	ClientURL, PeerURL  string
	Cmd                 *exec.Cmd
	Exited              chan struct{}
	initialCluster, out string
}

var memberBin = sync.OnceValues(func() (string, error) {
	return quotatest.BuildShared("./test/etcdcluster/etcdmember", "etcdmember", "test/etcdcluster/etcdmember")
})

// Start starts an etcd cluster of n members, each its own
// process, and waits until it serves; the members are killed when the test
// ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	bin, err := memberBin()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin}
	var peers []string
	for i := range n {
		m := &Member{Name: fmt.Sprintf("etcd-%d", i), Dir: filepath.Join(t.TempDir(), fmt.Sprintf("etcd-%d", i)),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", quotatest.FreePort(t)), PeerURL: fmt.Sprintf("http://127.0.0.1:%d", quotatest.FreePort(t))}
		peers = append(peers, m.Name+"="+m.PeerURL)
		c.Members = append(c.Members, m)
	}
	ready := make([]chan struct{}, n)
	for i, m := range c.Members {
		m.initialCluster = strings.Join(peers, ",")
		ready[i] = c.start(m, "new")
	}
	for i, m := range c.Members {
		c.wait(m, ready[i])
	}
	return c
}

// Endpoints are the members' client URLs, comma-separated (--etcd-servers).
func (c *Cluster) Endpoints() string {
	var urls []string
	for _, m := range c.Members {
		urls = append(urls, m.ClientURL)
	}
	return strings.Join(urls, ",")
}

func (c *Cluster) start(m *Member, state string, extra ...string) chan struct{} {
	c.t.Helper()
	m.Cmd = exec.Command(c.bin, append([]string{"--name", m.Name, "--data-dir", m.Dir, "--listen-client-url", m.ClientURL,
		"--listen-peer-url", m.PeerURL, "--initial-cluster", m.initialCluster, "--initial-cluster-state", state}, extra...)...)
	stderr := &quotatest.SyncBuffer{}
	m.Cmd.Stderr = stderr
	stdout, err := m.Cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := m.Cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	m.Exited = make(chan struct{})
	ready := make(chan struct{})
	exited := m.Exited
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			close(ready)
		}
		for s.Scan() {
		}
		_ = m.Cmd.Wait()
		m.out = stderr.Tail()
		close(exited)
	}()
	cmd := m.Cmd
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return ready
}

func (c *Cluster) wait(m *Member, ready chan struct{}) {
	c.t.Helper()
	select {
	case <-ready:
	case <-m.Exited:
		c.t.Fatalf("etcd member %s exited before it was ready: %s", m.Name, m.out)
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("etcd member %s was not ready within 2 minutes", m.Name)
	}
}

// Kill SIGKILLs member i.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	m := c.Members[i]
	_ = m.Cmd.Process.Signal(syscall.SIGKILL)
	<-m.Exited
}

// Restart starts member i again on its data directory, after Kill.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.Members[i]
	c.wait(m, c.start(m, "existing"))
}

// Leader is the index of the member that leads the etcd cluster now.
func (c *Cluster) Leader(ctx context.Context) int {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.Endpoints(), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	for i, m := range c.Members {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	c.t.Fatal("no etcd member leads")
	return -1
}

// Snapshot saves a snapshot of the cluster's keyspace to path (etcdctl
// snapshot save).
func (c *Cluster) Snapshot(ctx context.Context, path string) {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.Endpoints(), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil {
		c.t.Fatalf("saving the etcd snapshot: %v", err)
	}
}

// Restore replaces the cluster by one restored from the snapshot at path:
// every member is killed and started on a new data directory restored from
// it (revisions bumped and marked compacted), on the same URLs.
func (c *Cluster) Restore(path string) {
	c.t.Helper()
	for i := range c.Members {
		c.Kill(i)
	}
	ready := make([]chan struct{}, len(c.Members))
	for i, m := range c.Members {
		m.Dir = filepath.Join(c.t.TempDir(), m.Name+"-restored")
		ready[i] = c.start(m, "new", "--restore-snapshot", path)
	}
	for i, m := range c.Members {
		c.wait(m, ready[i])
	}
}
