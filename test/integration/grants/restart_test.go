package grants

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/grantpolicy"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestANewLeaderConverges: what changes while no grant engine runs — a
// trigger deleted, one created, one no longer matching, a policy deleted,
// a policy's finalizer removed by hand — is found by the next leader, from
// the labels of the grants, and converged on.
// ownServer starts a server of its own, whose grant engines the test starts
// and stops with the returned function (each call one replica, named by
// identity; stopping it releases its Lease).
func ownServer(t *testing.T) (*testserver.Server, func(identity string) (stop func())) {
	t.Helper()
	s, err := testserver.Start(testserver.Options{Components: []server.Component{engine.Start(quotatest.FastEngineOptions())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	run := func(identity string) (stop func()) {
		o := grantpolicy.DefaultOptions()
		o.Identity = identity
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, 3*time.Second, 200*time.Millisecond
		r, err := grantpolicy.New(s.Config, o)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx)
		}()
		return func() {
			cancel()
			<-done
		}
	}
	return s, run
}

func TestANewLeaderConverges(t *testing.T) {
	quotatest.Exclusive(t)
	s, run := ownServer(t)

	w := newWorldOn(t, s.Config, "projects")
	gold := w.tierPolicy("gold", "gold", "projects", 1)
	kept := w.tierPolicy("kept", "gold", "projects", 1)
	deleted := w.tierPolicy("deleted", "gold", "projects", 1)
	unfinalized := w.tierPolicy("unfinalized", "gold", "projects", 1)
	a := w.configMap("a", "tier", "gold")
	b := w.configMap("b", "tier", "gold")

	stop := run("first")
	for _, p := range []*quotav1alpha1.GrantCreationPolicy{gold, kept, deleted, unfinalized} {
		w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
		w.waitGrants(p.Name, w.NS+"/a-"+p.Name[len(w.ID)+1:], w.NS+"/b-"+p.Name[len(w.ID)+1:])
	}
	stop()

	// No grant engine runs now.
	ctx := context.Background()
	if err := w.C.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	w.update(b, func() { b.Labels["tier"] = "silver" })
	w.configMap("c", "tier", "gold")
	if err := w.C.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if err := w.C.Patch(ctx, unfinalized, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	if err := w.C.Delete(ctx, unfinalized); err != nil {
		t.Fatal(err)
	}
	// Without a grant engine, the grants of b (no longer matching) and of
	// the deleted policies stay; a's went with a, their owner.
	time.Sleep(time.Second)
	w.waitGrants(gold.Name, w.NS+"/b-gold")
	w.waitGrants(deleted.Name, w.NS+"/b-deleted")
	w.waitGrants(unfinalized.Name, w.NS+"/b-unfinalized")

	began := time.Now()
	stop = run("second")
	defer stop()
	w.waitGrants(gold.Name, w.NS+"/c-gold")
	w.waitGrants(kept.Name, w.NS+"/c-kept")
	w.waitGrants(deleted.Name)
	w.waitGrants(unfinalized.Name)
	t.Logf("measured: new leader started → converged %s", time.Since(began))
	err := w.C.Get(ctx, client.ObjectKeyFromObject(deleted), &quotav1alpha1.GrantCreationPolicy{})
	for i := 0; err == nil && i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
		err = w.C.Get(ctx, client.ObjectKeyFromObject(deleted), &quotav1alpha1.GrantCreationPolicy{})
	}
	if err == nil {
		t.Error("the deleted policy is still held by its finalizer")
	}
}

// TestFailoverMidBurst: the leading grant engine stops in the middle of a
// burst while another replica waits; the new leader finishes the burst.
// With a generateName template (the one case the API server cannot refuse
// as a duplicate), every object ends with exactly one grant.
func TestFailoverMidBurst(t *testing.T) {
	quotatest.Exclusive(t)
	const n = 100
	s, run := ownServer(t)
	w := newWorldOn(t, s.Config, "projects")
	p := w.tierPolicy("gen", "gold", "projects", 1, func(p *quotav1alpha1.GrantCreationPolicy) {
		p.Spec.Target.ResourceGrantTemplate.Metadata.Name = ""
		p.Spec.Target.ResourceGrantTemplate.Metadata.GenerateName = "{{ trigger.metadata.name }}-"
	})
	stopFirst := run("first")
	w.waitReady(p, metav1.ConditionTrue, policy.ReasonReady)
	stopSecond := run("second")
	defer stopSecond()

	created := make(chan struct{})
	go func() {
		defer close(created)
		quotatest.ForEach(t, n, func(i int) error {
			return w.C.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Namespace: w.NS, Labels: map[string]string{"tier": "gold"}}})
		})
	}()
	// Stop the leader once some grants exist.
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return len(w.grantsOf(p.Name)) >= n/4, nil
	})
	if err != nil {
		t.Fatal("the first leader made no grants")
	}
	stopFirst()
	failed := time.Now()
	<-created

	var grants []quotav1alpha1.ResourceGrant
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		grants = w.grantsOf(p.Name)
		return len(grants) == n, nil
	})
	if err != nil {
		t.Fatalf("%d grants after the failover, want %d", len(grants), n)
	}
	t.Logf("measured: leader stopped mid-burst → all %d grants made %s later", n, time.Since(failed).Round(time.Millisecond))
	time.Sleep(time.Second)
	per := map[string]int{}
	for _, g := range w.grantsOf(p.Name) {
		per[g.Labels[quotav1alpha1.GrantPolicyLabelTriggerName]]++
	}
	for i := range n {
		if name := fmt.Sprintf("cm-%03d", i); per[name] != 1 {
			t.Errorf("%s has %d grants, want 1", name, per[name])
		}
	}
}
