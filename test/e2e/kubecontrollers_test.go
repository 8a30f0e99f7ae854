package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server/etcd"
	"github.com/quotaplane/quotaplane/internal/server/kubecontrollers"
)

// leadingLog and stoppedLog are what a replica logs when it wins the
// controllers' Lease, and when it has lost it and stopped them.
const (
	leadingLog = "Leading: running the garbage collector, namespace and ResourceQuota controllers"
	stoppedLog = "No longer leading; the controllers have stopped; campaigning again"
)

// TestKubeControllersLeaderElected runs two serve replicas, a and b, on one
// external etcd. Exactly one holds the upstream controllers' Lease and runs
// them, and the garbage collector deletes the dependent of a deleted owner.
// The holder is paused (SIGSTOP) until the other takes the Lease over; once
// resumed it finds the Lease lost and stops its controllers. Then the new
// holder is killed (SIGKILL): the first replica, which kept campaigning,
// takes the Lease back, and the garbage collector works throughout.
func TestKubeControllersLeaderElected(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	bin := buildBinary(t)
	began := time.Now()
	etcdConfig, err := etcd.Options{Dir: filepath.Join(t.TempDir(), "etcd"), UnsafeNoFsync: true}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	etcdServer, err := etcdConfig.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcdServer.Stop) // after the replicas

	// One after the other: the first installs the CRDs.
	replicas := []*replica{
		startReplica(t, bin, "a", etcdServer.ClientURL()),
		startReplica(t, bin, "b", etcdServer.ClientURL()),
	}
	t.Logf("two replicas ready after %s", time.Since(began).Round(time.Millisecond))

	first := waitLeaseHolder(t, replicas[0].client, replicas, nil)
	second := replicas[0]
	if second == first {
		second = replicas[1]
	}
	t.Logf("replica %s holds the Lease as %s", first.name, first.identity)
	if got := strings.Count(first.stderr.String(), leadingLog); got != 1 {
		t.Errorf("replica %s holds the Lease and started the controllers %d times; want once", first.name, got)
	}
	if strings.Contains(second.stderr.String(), leadingLog) {
		t.Errorf("replica %s started the controllers without holding the Lease", second.name)
	}
	t.Logf("garbage collected in %s", collectsGarbage(t, second.client, "one").Round(time.Millisecond))

	// A paused holder loses the Lease and, once resumed, stops its controllers.
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	waitLeaseHolder(t, second.client, replicas, second)
	t.Logf("replica %s took the Lease over %s after %s was paused", second.name, time.Since(paused).Round(time.Millisecond), first.name)
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return strings.Contains(first.stderr.String(), stoppedLog), nil
	})
	if err != nil {
		t.Fatalf("replica %s, resumed without the Lease, did not stop its controllers within 15s", first.name)
	}
	if holder := waitLeaseHolder(t, first.client, replicas, nil); holder != second {
		t.Fatalf("the resumed replica %s took the Lease back from %s", first.name, second.name)
	}
	t.Logf("garbage collected in %s", collectsGarbage(t, first.client, "two").Round(time.Millisecond))

	// The holder is killed; the other replica campaigned again and takes over.
	if err := second.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-second.exited
	killed := time.Now()
	waitLeaseHolder(t, first.client, replicas, first)
	t.Logf("replica %s took the Lease back %s after %s was killed", first.name, time.Since(killed).Round(time.Millisecond), second.name)
	if got := strings.Count(first.stderr.String(), leadingLog); got != 2 {
		t.Errorf("replica %s started the controllers %d times; want twice (two terms)", first.name, got)
	}
	t.Logf("garbage collected in %s", collectsGarbage(t, first.client, "three").Round(time.Millisecond))
	t.Logf("whole test %s after the build", time.Since(began).Round(time.Millisecond))
}

// replica is one `quotaplane serve` process on an external etcd.
type replica struct {
	name     string
	identity string
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{} // closed once the process has been waited for
	exitErr  error
	client   kubernetes.Interface
	config   *rest.Config
}

// startReplica starts serve on etcdURL with short leader election timings
// and waits for its banner.
func startReplica(t *testing.T, bin, name, etcdURL string) *replica {
	t.Helper()
	dataDir := filepath.Join(t.TempDir(), name)
	r := &replica{name: name, identity: engine.StableIdentity("serve", dataDir), stderr: &syncBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(bin, "serve", "--data-dir", dataDir, "--secure-port", strconv.Itoa(freePort(t)),
		"--etcd-servers", etcdURL,
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "250ms")
	r.cmd.Stderr = r.stderr
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
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
		r.exitErr = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
		}
	})
	select {
	case <-banner:
	case <-r.exited:
		t.Fatalf("replica %s exited before it was ready: %v\n%s", name, r.exitErr, r.stderr.tail())
	case <-time.After(2 * time.Minute):
		t.Fatalf("replica %s was not ready within 2 minutes\n%s", name, r.stderr.tail())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	r.config = cfg
	r.client = kubernetes.NewForConfigOrDie(cfg)
	return r
}

// waitLeaseHolder waits until the controllers' Lease is held by want, or by
// one of replicas when want is nil, and returns the holder.
func waitLeaseHolder(t *testing.T, c kubernetes.Interface, replicas []*replica, want *replica) *replica {
	t.Helper()
	var holder *replica
	var seen string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := c.CoordinationV1().Leases(engine.DefaultOptions().SystemNamespace).Get(ctx, kubecontrollers.LeaseName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		seen = *lease.Spec.HolderIdentity
		for _, r := range replicas {
			if r.identity == seen && (want == nil || r == want) {
				holder = r
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the controllers' Lease is held by %q; want a replica's identity (waited 20s)", seen)
	}
	return holder
}

// collectsGarbage creates an owner and its dependent in a new namespace,
// deletes the owner, and returns how long the dependent took to go away.
func collectsGarbage(t *testing.T, c kubernetes.Interface, name string) time.Duration {
	t.Helper()
	ctx := t.Context()
	ns := "gc-" + name
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
	}}}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, dependent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := c.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().ConfigMaps(ns).Get(ctx, dependent.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the dependent of a deleted owner in %s still exists after 20s: no garbage collector runs", ns)
	}
	return time.Since(began)
}

// syncBuffer is a bytes.Buffer a process writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (s *syncBuffer) tail() string {
	out := s.String()
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return out
}
