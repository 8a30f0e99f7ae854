package owning

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
)

// A claim created right after its grant is decided against that grant: its
// first decision is Granted, never a denial "limit 0" from an engine whose
// grants' watch had not delivered the grant yet (that denial would be
// followed by a grant a moment later). 10 rounds, each a new grant then at
// once a claim of all of it; every decision the claim ever shows is watched.
// 8 services do it at once, so the grants' watch and the claims' watch race
// as under load.
func TestAClaimRightAfterItsGrantIsNotDenied(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		s := newService(t, 1)
		wg.Go(func() { grantThenClaim(t, s, 10) })
	}
	wg.Wait()
}

func grantThenClaim(t *testing.T, s *service, rounds int) {
	ctx := context.Background()
	for i := range rounds {
		owner := s.resource(fmt.Sprintf("fresh-%d", i))
		name := s.claimer.Name(owner)
		w, err := s.quota.QuotaV1alpha1().ResourceClaims(s.f.NS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Error(err)
			return
		}
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fresh-%d", i), Namespace: s.f.NS},
			Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: s.f.Org, Allowances: []quotav1alpha1.Allowance{{ResourceType: s.f.RT("cpu"),
				Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
		if _, err := s.quota.QuotaV1alpha1().ResourceGrants(s.f.NS).Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Error(err)
			return
		}
		// All of the limit, the new grant's 5 included: without it, it
		// cannot fit.
		if _, err := s.claimer.Ensure(ctx, owner, s.f.Org, s.cpu(1+5*int64(i+1))); err != nil {
			t.Error(err)
			return
		}
		first := firstDecision(t, w)
		w.Stop()
		if first.Phase != quotaclaim.Granted {
			t.Errorf("round %d: the claim's first decision was %s (%s: %s), want Granted: the engine decided it before seeing the grant created just before it", i, first.Phase, first.Reason, first.Message)
		}
		if err := s.claimer.Release(ctx, owner); err != nil {
			t.Error(err)
			return
		}
	}
}

func firstDecision(t *testing.T, w watch.Interface) quotaclaim.Status {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Error("the watch of the claim ended before its decision")
				return quotaclaim.Status{}
			}
			c, isClaim := e.Object.(*quotav1alpha1.ResourceClaim)
			if !isClaim {
				continue
			}
			if st := quotaclaim.StatusOf(c); st.Phase != quotaclaim.Pending {
				return st
			}
		case <-timeout:
			t.Error("no decision within 30 s")
			return quotaclaim.Status{}
		}
	}
}
