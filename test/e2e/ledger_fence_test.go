package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestDeletedLedgerCannotRevivePausedLeader: two serve replicas on one
// external etcd. The engine's leader is paused (SIGSTOP), its ledger deleted
// straight from etcd (the API refuses), and the other replica takes over —
// creating a new ledger whose epoch starts over at the paused leader's own
// epoch. The old leader is resumed while creates are sent to both replicas:
// it must not admit a single one more. Exactly the limit is stored and
// charged.
func TestDeletedLedgerCannotRevivePausedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	const limit = 40
	bin := buildBinary(t)
	etcdURL := quotatest.StartEtcd(t)
	replicas := []*replica{
		startReplica(t, bin, "a", etcdURL),
		startReplica(t, bin, "b", etcdURL),
	}
	ctx := t.Context()
	ns := engine.DefaultOptions().SystemNamespace
	engineHolder := func(c kubernetes.Interface) string {
		l, err := c.CoordinationV1().Leases(ns).Get(ctx, "quotaplane-quota-engine", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leader, other *replica
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		h := engineHolder(replicas[0].Client)
		for i, r := range replicas {
			if r.Identity == h {
				leader, other = r, replicas[1-i]
			}
		}
		return leader != nil, nil
	}); err != nil {
		t.Fatal("no replica leads the engine")
	}
	cm, err := leader.Client.CoreV1().ConfigMaps(ns).Get(ctx, admit.LedgerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %s leads the engine at epoch %s", leader.Name, cm.Data["epoch"])

	leader.Config.QPS, leader.Config.Burst = 500, 1000
	other.Config.QPS, other.Config.Burst = 500, 1000
	f := quotatest.NewFixture(t, quotatest.NewClient(t, leader.Config))
	f.SecretsPolicy(limit)
	// Half the quota taken while the first leader leads.
	for i := range limit / 2 {
		if err := f.C.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("before-%d", i), Namespace: f.NS}}); err != nil {
			t.Fatalf("create %d under the first leader: %v", i, err)
		}
	}

	// Pause the leader, delete its ledger, let the other replica take over.
	if err := leader.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = leader.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	kv, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	if _, err := kv.Delete(ctx, "/registry/configmaps/"+ns+"/"+admit.LedgerName); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return engineHolder(other.Client) == other.Identity, nil
	}); err != nil {
		t.Fatalf("replica %s did not take the engine over", other.Name)
	}
	var newEpoch string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		cm, err := other.Client.CoreV1().ConfigMaps(ns).Get(ctx, admit.LedgerName, metav1.GetOptions{})
		if err == nil {
			newEpoch = cm.Data["epoch"]
		}
		return err == nil && cm.Data["holder"] == other.Identity, nil
	}); err != nil {
		t.Fatal("the new leader wrote no ledger")
	}
	t.Logf("replica %s took over with a new ledger at epoch %s", other.Name, newEpoch)

	// Resume the old leader and send creates to both replicas at once.
	clients := []client.Client{quotatest.NewClient(t, leader.Config), quotatest.NewClient(t, other.Config)}
	resume()
	var stored atomic.Int64
	var byReplica [2]atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int, 4*limit)
	for i := range 4 * limit {
		next <- i
	}
	close(next)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%2]
			for i := range next {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("after-%d", i), Namespace: f.NS}}
				err := c.Create(ctx, s)
				switch {
				case err == nil:
					stored.Add(1)
					byReplica[w%2].Add(1)
				case apierrors.IsForbidden(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err):
				default:
					// the resumed replica may answer anything while it
					// finds out it was deposed; nothing may be stored
					// uncharged either way (checked below)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("after the resume: %d creates admitted (room for %d): %d by the resumed %s, %d by %s", stored.Load(), limit/2,
		byReplica[0].Load(), leader.Name, byReplica[1].Load(), other.Name)

	// Exactly the limit is stored, and each stored Secret has its granted claim.
	c := clients[1]
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		secrets := &corev1.SecretList{}
		claims := &quotav1alpha1.ResourceClaimList{}
		if c.List(ctx, secrets, client.InNamespace(f.NS)) != nil || c.List(ctx, claims, client.InNamespace(f.NS)) != nil {
			return false, nil
		}
		granted := map[string]bool{}
		for _, cl := range claims.Items {
			if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
				granted[cl.Annotations[quotav1alpha1.AnnotationResourceUID]] = true
			}
		}
		n := 0
		for _, s := range secrets.Items {
			n++
			if !granted[string(s.UID)] {
				return false, nil
			}
		}
		if n > limit {
			for _, r := range []*replica{leader, other} {
				var lines []string
				for _, l := range strings.Split(r.Stderr.String(), "\n") {
					if strings.Contains(l, "eposed") || strings.Contains(l, "ledger") || strings.Contains(l, "term") || strings.Contains(l, "lead") {
						lines = append(lines, l)
					}
				}
				t.Logf("replica %s:\n%s", r.Name, strings.Join(lines, "\n"))
			}
			buckets := &quotav1alpha1.AllowanceBucketList{}
			_ = c.List(ctx, buckets, client.InNamespace(f.BucketNS))
			for _, b := range buckets.Items {
				t.Logf("bucket %s: limit %d allocated %d claims %d", b.Name, b.Status.Limit, b.Status.Allocated, b.Status.ClaimCount)
			}
			t.Logf("claims listed %d granted %d", len(claims.Items), len(granted))
			t.Fatalf("%d Secrets stored for a limit of %d: the resumed leader admitted past its fence", n, limit)
		}
		return n == limit && len(granted) == limit, nil
	})
	if err != nil {
		t.Fatalf("the stored Secrets never settled at exactly the limit of %d, each charged", limit)
	}
	f.C = c
	f.WaitBucket(quotatest.N(limit, limit, 0), "secrets")
}
