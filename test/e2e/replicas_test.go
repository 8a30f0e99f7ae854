package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// startController starts a `quotaplane controller` replica with short leader
// election timings.
func startController(t *testing.T, bin, kubeconfig string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "controller", "--kubeconfig", kubeconfig, "--metrics-bind-address", "",
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "250ms")
	cmd.Stderr = &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// leaderPID reads the engine Lease and returns the pid in its holder identity
// (host_pid_random).
func leaderPID(ctx context.Context, kc kubernetes.Interface) (int, error) {
	lease, err := kc.CoordinationV1().Leases("quotaplane-system").Get(ctx, "quotaplane-quota-engine", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return 0, fmt.Errorf("no leader yet: %v", err)
	}
	parts := strings.Split(*lease.Spec.HolderIdentity, "_")
	if len(parts) < 3 {
		return 0, fmt.Errorf("unexpected identity %q", *lease.Spec.HolderIdentity)
	}
	return strconv.Atoi(parts[len(parts)-2])
}

// TestTwoReplicasLeaderKilled runs two engine replicas (quotaplane controller)
// against one server and etcd. Limit L, 4L claims created concurrently, 20
// rounds; in the middle round the leader is killed with SIGKILL while claims
// are being created. Every round grants exactly L and allocates exactly L.
func TestTwoReplicasLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	bin := buildBinary(t)
	srv, err := testserver.Start(testserver.Options{}) // no in-process engine: the replicas decide
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	kc := kubernetes.NewForConfigOrDie(srv.Config)
	replicas := map[int]*exec.Cmd{}
	for range 2 {
		c := startController(t, bin, srv.Kubeconfig)
		replicas[c.Process.Pid] = c
	}

	const limit, rounds = 25, 20
	c := quotatest.NewClient(t, srv.Config)
	killed := false
	for round := range rounds {
		f := quotatest.NewFixture(t, c)
		f.Register("projects")
		f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: limit}}})
		done := make(chan error, 1)
		go func() { done <- quotatest.CreateConcurrently(f, "c", 4*limit, 16) }()
		if round == rounds/2 {
			time.Sleep(30 * time.Millisecond) // in the middle of the burst
			var pid int
			err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				p, err := leaderPID(ctx, kc)
				pid = p
				return err == nil && replicas[p] != nil, nil
			})
			if err != nil {
				t.Fatalf("no replica holds the lease: %v", err)
			}
			if err := replicas[pid].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d: killed the leader (pid %d) with SIGKILL", round, pid)
			killed = true
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if got := quotatest.CountDecided(t, f, 4*limit, time.Minute); got != limit {
			t.Fatalf("round %d: %d claims granted for a limit of %d", round, got, limit)
		}
		f.WaitBucket(quotatest.N(limit, limit, 0), "projects")
		if round == rounds/2 {
			t.Logf("round %d: every claim decided %s after the burst, failover included", round, time.Since(began).Round(time.Millisecond))
		}
	}
	if !killed {
		t.Fatal("no replica was killed")
	}
}
