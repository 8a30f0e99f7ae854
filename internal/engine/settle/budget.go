package settle

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// BudgetLookupDelay is how long after an unclear end a grant is looked up:
// longer than a request can still be writing.
const BudgetLookupDelay = 70 * time.Second

// maxDeletes keeps a transaction under etcd's default --max-txn-ops (128).
const maxDeletes = 120

// BudgetEnded settles the budget holds of a request that ended: a refused
// grant is released at once; a stored one is settled by the grant informer;
// one whose end is unclear is looked up once the request can no longer be
// writing it.
func (s *Settler) BudgetEnded(holds []quota.Grant, out formats.Outcome) {
	switch out {
	case formats.OutcomeStored:
		go s.SettleBudgetHolds()
	case formats.OutcomeRefused:
		s.Cache.ReleaseBudgetHolds(holds...)
		go s.SettleBudgetHolds()
	default:
		go s.LookUpBudgetHolds(holds, BudgetLookupDelay)
	}
}

// LookUpBudgetHolds releases, after delay, each hold whose grant is not
// stored (at its UID and generation or later).
func (s *Settler) LookUpBudgetHolds(holds []quota.Grant, delay time.Duration) {
	select {
	case <-s.Ctx.Done():
		return
	case <-time.After(delay):
	}
	for _, g := range holds {
		var got quotav1alpha1.ResourceGrant
		err := s.Client.Get(s.Ctx, client.ObjectKey{Namespace: g.Namespace, Name: g.Name}, &got)
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(s.Ctx).Error(err, "Looking up a grant whose request ended unclearly; its budget stays held until the next leader", "grant", g.Namespace+"/"+g.Name)
			continue
		}
		if apierrors.IsNotFound(err) || string(got.UID) != g.UID || got.Generation < g.Generation {
			s.Cache.ReleaseBudgetHolds(g)
		}
	}
	s.SettleBudgetHolds()
	s.Cache.Notify()
}

// SettleBudgetHolds deletes the journal keys of holds the accounts no longer
// have (settled by the stored grant, or released).
func (s *Settler) SettleBudgetHolds() {
	j := s.Committer.Journal()
	if j == nil {
		return
	}
	s.BudgetMu.Lock()
	defer s.BudgetMu.Unlock()
	done := s.Cache.SettledBudgetHolds()
	var ops []clientv3.Op
	for _, r := range done {
		// Only the key of this hold: a newer hold of the same grant keeps its own.
		ops = append(ops, clientv3.OpDelete(j.BudgetKey(r.Key())))
	}
	for len(ops) > 0 {
		n := min(len(ops), maxDeletes)
		if err := j.Commit(s.Ctx, ops[:n], nil); err != nil {
			klog.FromContext(s.Ctx).V(1).Info("Deleting settled budget holds failed; the next leader looks them up", "err", err)
			return
		}
		ops = ops[n:]
	}
}
