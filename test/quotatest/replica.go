package quotatest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server/etcd"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// Replica is one `quotaplane serve` process on an external etcd.
type Replica struct {
	Name     string
	Identity string // its leader-election identity
	DataDir  string
	Cmd      *exec.Cmd
	Stderr   *SyncBuffer
	Exited   chan struct{} // closed once the process has been waited for
	ExitErr  error
	Client   kubernetes.Interface
	Config   *rest.Config
	// Args are the extra flags it was started with.
	Args []string
}

// StartReplica starts serve on etcdURL (on its own embedded etcd when
// empty) with short leader election timings and waits for its banner. The process is killed when the test ends.
func StartReplica(t testing.TB, bin, name, etcdURL string, args ...string) *Replica {
	t.Helper()
	return startReplicaIn(t, bin, name, filepath.Join(t.TempDir(), name), etcdURL, args)
}

// Restart starts the replica again on its data directory after it exited.
func (r *Replica) Restart(t testing.TB, bin, etcdURL string) *Replica {
	t.Helper()
	return startReplicaIn(t, bin, r.Name, r.DataDir, etcdURL, r.Args)
}

func startReplicaIn(t testing.TB, bin, name, dataDir, etcdURL string, args []string) *Replica {
	t.Helper()
	sharePKI(t, etcdURL, dataDir)
	// A free port found here may be taken by another process before serve
	// listens on it: serve then exits saying so, and is started again on
	// another.
	for attempt := 1; ; attempt++ {
		r, portTaken := startReplicaOnce(t, bin, name, dataDir, etcdURL, args)
		if !portTaken || attempt == 3 {
			if r == nil {
				t.Fatalf("replica %s exited before it was ready: its ports were taken %d times", name, attempt)
			}
			return r
		}
		t.Logf("replica %s: a port was taken before it listened; starting it again on others", name)
	}
}

// startReplicaOnce starts the replica; when it exits before it is ready
// because a port was taken, it returns nil and true.
func startReplicaOnce(t testing.TB, bin, name, dataDir, etcdURL string, args []string) (*Replica, bool) {
	t.Helper()
	r := &Replica{Name: name, DataDir: dataDir, Identity: engine.StableIdentity("serve", dataDir), Stderr: &SyncBuffer{}, Exited: make(chan struct{}), Args: args}
	flags := []string{"serve", "--data-dir", dataDir, "--secure-port", strconv.Itoa(FreePort(t)),
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "250ms"}
	if etcdURL != "" {
		flags = append(flags, "--etcd-servers", etcdURL)
	}
	r.Cmd = exec.Command(bin, append(flags, args...)...)
	r.Cmd.Stderr = r.Stderr
	stdout, err := r.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := make(chan struct{})
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			close(banner)
		}
		for s.Scan() {
		}
		r.ExitErr = r.Cmd.Wait()
		close(r.Exited)
	}()
	t.Cleanup(func() {
		_ = r.Cmd.Process.Kill()
		select {
		case <-r.Exited:
		case <-time.After(10 * time.Second):
		}
	})
	select {
	case <-banner:
	case <-r.Exited:
		if strings.Contains(r.Stderr.String(), "address already in use") {
			return nil, true
		}
		t.Fatalf("replica %s exited before it was ready: %v\n%s", name, r.ExitErr, r.Stderr.Tail())
	case <-time.After(2 * time.Minute):
		t.Fatalf("replica %s was not ready within 2 minutes\n%s", name, r.Stderr.Tail())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	r.Config = cfg
	r.Client = kubernetes.NewForConfigOrDie(cfg)
	return r, false
}

// FreePort returns a free loopback port.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// SyncBuffer is a bytes.Buffer a process writes to while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Tail is the last 4,000 bytes written.
func (s *SyncBuffer) Tail() string {
	out := s.String()
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return out
}

// StartEtcd starts an etcd (embedded in the test process, on loopback) for
// serve replicas to share, stopped when the test ends, and returns its URL.
func StartEtcd(t testing.TB) string {
	t.Helper()
	cfg, err := etcd.Options{Dir: filepath.Join(t.TempDir(), "etcd"), UnsafeNoFsync: true}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop) // after the replicas, whose cleanups run first
	return s.ClientURL()
}

// TakeEngineLease makes holder the quota engine's leader for seconds: with
// another holder, no replica of the engine decides (and with 1 second, the
// engine takes its Lease back at once).
func TakeEngineLease(t testing.TB, kube kubernetes.Interface, systemNamespace, holder string, seconds int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := kube.CoordinationV1().Leases(systemNamespace).Get(t.Context(), "quotaplane-quota-engine", metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &holder, &seconds
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		_, err = kube.CoordinationV1().Leases(systemNamespace).Update(t.Context(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sharePKI gives dataDir, before its first start, the material every replica
// on one etcd shares (docs/operations.md): the CA, the service-account key
// and the peer CA, made once per etcd.
func sharePKI(t testing.TB, etcdURL, dataDir string) {
	t.Helper()
	sum := sha256.Sum256([]byte(etcdURL))
	shared := filepath.Join(os.TempDir(), "quotaplane-test-pki-"+hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(shared); errors.Is(err, os.ErrNotExist) {
		if _, err := pki.Ensure(shared, nil, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(shared) })
	}
	from, to := pki.FilesIn(shared), pki.FilesIn(filepath.Join(dataDir, "pki"))
	if _, err := os.Stat(to.CACert); err == nil {
		return // started before: it has them
	}
	if err := os.MkdirAll(to.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{from.CACert: to.CACert, from.CAKey: to.CAKey, from.ServiceAcctKey: to.ServiceAcctKey,
		from.PeerCACert: to.PeerCACert, from.PeerCAKey: to.PeerCAKey} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
