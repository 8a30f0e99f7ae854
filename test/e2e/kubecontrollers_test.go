package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/server/kubecontrollers"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// leadingLog and stoppedLog are what a replica logs when it wins the
// controllers' Lease, and when it has lost it and stopped them; upstream
// names these controllers among the others that run on a Lease.
const (
	leadingLog = "Leading: running the controllers"
	stoppedLog = "No longer leading; the controllers have stopped; campaigning again"
	upstream   = `controllers="garbage collector, namespace and ResourceQuota controllers"`
)

// logged counts the lines of a replica's log with msg about the upstream
// controllers.
func logged(log, msg string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, msg) && strings.Contains(l, upstream) {
			n++
		}
	}
	return n
}

// waitLogged waits up to 10s until r's log has want lines with msg about the
// upstream controllers, and returns how many it has. A replica writes the
// Lease before its elector's callback logs, so a reader who sees the Lease
// may be a moment ahead of the log.
func waitLogged(t *testing.T, r *replica, msg string, want int) int {
	t.Helper()
	got := 0
	_ = wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got = logged(r.Stderr.String(), msg)
		return got >= want, nil
	})
	return got
}

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
	etcdURL := quotatest.StartEtcd(t)

	// One after the other: the first installs the CRDs.
	replicas := []*replica{
		startReplica(t, bin, "a", etcdURL),
		startReplica(t, bin, "b", etcdURL),
	}
	t.Logf("two replicas ready after %s", time.Since(began).Round(time.Millisecond))

	first := waitLeaseHolder(t, replicas[0].Client, replicas, nil)
	second := replicas[0]
	if second == first {
		second = replicas[1]
	}
	t.Logf("replica %s holds the Lease as %s", first.Name, first.Identity)
	if got := waitLogged(t, first, leadingLog, 1); got != 1 {
		t.Errorf("replica %s holds the Lease and started the controllers %d times; want once", first.Name, got)
	}
	if logged(second.Stderr.String(), leadingLog) > 0 {
		t.Errorf("replica %s started the controllers without holding the Lease", second.Name)
	}
	t.Logf("garbage collected in %s", collectsGarbage(t, second.Client, "one").Round(time.Millisecond))

	// A paused holder loses the Lease and, once resumed, stops its controllers.
	if err := first.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	waitLeaseHolder(t, second.Client, replicas, second)
	t.Logf("replica %s took the Lease over %s after %s was paused", second.Name, time.Since(paused).Round(time.Millisecond), first.Name)
	if err := first.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		return logged(first.Stderr.String(), stoppedLog) > 0, nil
	})
	if err != nil {
		t.Fatalf("replica %s, resumed without the Lease, did not stop its controllers within 15s", first.Name)
	}
	if holder := waitLeaseHolder(t, first.Client, replicas, nil); holder != second {
		t.Fatalf("the resumed replica %s took the Lease back from %s", first.Name, second.Name)
	}
	t.Logf("garbage collected in %s", collectsGarbage(t, first.Client, "two").Round(time.Millisecond))

	// The holder is killed; the other replica campaigned again and takes over.
	if err := second.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-second.Exited
	killed := time.Now()
	waitLeaseHolder(t, first.Client, replicas, first)
	t.Logf("replica %s took the Lease back %s after %s was killed", first.Name, time.Since(killed).Round(time.Millisecond), second.Name)
	if got := waitLogged(t, first, leadingLog, 2); got != 2 {
		t.Errorf("replica %s started the controllers %d times; want twice (two terms)", first.Name, got)
	}
	t.Logf("garbage collected in %s", collectsGarbage(t, first.Client, "three").Round(time.Millisecond))
	t.Logf("whole test %s after the build", time.Since(began).Round(time.Millisecond))
}

// replica is one `quotaplane serve` process on an external etcd.
type replica = quotatest.Replica

func startReplica(t *testing.T, bin, name, etcdURL string) *replica {
	t.Helper()
	return quotatest.StartReplica(t, bin, name, etcdURL)
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
			if r.Identity == seen && (want == nil || r == want) {
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
