package tenancy

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/tenancy"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestTenancyFailsOver: two serve replicas on one etcd; the tenancy
// controllers run on the holder of their Lease only. Killed, the holder's
// work is taken over: an organization created afterwards becomes Ready.
func TestTenancyFailsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two replicas")
	}
	quotatest.Exclusive(t)
	bin := quotatest.BuildBinary(t)
	etcdURL := quotatest.StartEtcd(t)
	replicas := []*quotatest.Replica{quotatest.StartReplica(t, bin, "one", etcdURL), quotatest.StartReplica(t, bin, "two", etcdURL)}

	holder := func() *quotatest.Replica {
		t.Helper()
		var got *quotatest.Replica
		var seen string
		err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, r := range replicas {
				if isExited(r) {
					continue
				}
				l, err := r.Client.CoordinationV1().Leases(engine.DefaultOptions().SystemNamespace).Get(ctx, tenancy.LeaseName, metav1.GetOptions{})
				if err != nil || l.Spec.HolderIdentity == nil {
					continue
				}
				seen = *l.Spec.HolderIdentity
				for _, c := range replicas {
					if c.Identity == seen && !isExited(c) {
						got = c
						return true, nil
					}
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("the tenancy Lease is held by %q, not by a running replica (waited 30s)", seen)
		}
		return got
	}

	lead := holder()
	var other *quotatest.Replica
	for _, r := range replicas {
		if r != lead {
			other = r
		}
	}
	c := quotatest.NewClient(t, other.Config)
	first := newOrganization(uniq("before"))
	if err := c.Create(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, first, metav1.ConditionTrue)

	if err := lead.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-lead.Exited
	began := time.Now()
	second := newOrganization(uniq("after"))
	if err := c.Create(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	waitReady(t, c, second, metav1.ConditionTrue)
	if h := holder(); h != other {
		t.Errorf("the tenancy Lease is held by %s, want %s", h.Name, other.Name)
	}
	t.Logf("leader %s killed; organization created on %s Ready %s later (Lease duration 3s)", lead.Name, other.Name, time.Since(began).Round(time.Millisecond))
}

func isExited(r *quotatest.Replica) bool {
	select {
	case <-r.Exited:
		return true
	default:
		return false
	}
}
