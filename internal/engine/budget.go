package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/journalkeys"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Delegated budgets (docs/exactly-once.md "Quota at several levels"). A
// grant an organization's owners write for a project is admitted against
// the organization's budget by the engine, serialized with its other
// decisions, and held until it is seen stored. The hold is also a key of
// admission's fenced journal, written before admission answers: a leader
// deposed meanwhile cannot write it (the grant is refused), and a new leader
// reads every hold an earlier one made before it decides anything, so no
// change of leader lets two grants both take the last of a budget.

// budgetRecord is a hold as the journal keeps it.
type budgetRecord struct {
	UID        string            `json:"uid"`
	Generation int64             `json:"gen"`
	Namespace  string            `json:"ns"`
	Name       string            `json:"n"`
	Consumer   quota.ConsumerID  `json:"c"`
	Budget     quota.ConsumerID  `json:"b"`
	Allowances []quota.Allowance `json:"a"`
	Created    time.Time         `json:"t"`
}

func newBudgetRecord(g quota.Grant) *budgetRecord {
	return &budgetRecord{UID: g.UID, Generation: g.Generation, Namespace: g.Namespace, Name: g.Name,
		Consumer: g.Consumer, Budget: *g.Budget, Allowances: g.Allowances, Created: time.Now()}
}

func (r *budgetRecord) grant() quota.Grant {
	b := r.Budget
	return quota.Grant{UID: r.UID, Generation: r.Generation, Namespace: r.Namespace, Name: r.Name,
		Consumer: r.Consumer, Budget: &b, Allowances: r.Allowances}
}

func (r *budgetRecord) key() string { return key(r.Namespace, r.Name) }

func (j *journal) budgetKey(grantKey string) string {
	return journalkeys.BudgetHoldsPrefix(j.s.Prefix) + grantKey
}

// recordBudgetHold writes a hold, fenced like every journal write.
func (j *journal) recordBudgetHold(ctx context.Context, r *budgetRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return j.commit(ctx, []clientv3.Op{clientv3.OpPut(j.budgetKey(r.key()), string(v))}, nil)
}

// budgetHolds reads every hold recorded in the journal.
func (j *journal) budgetHolds(ctx context.Context) ([]*budgetRecord, error) {
	resp, err := j.s.Client.Get(ctx, journalkeys.BudgetHoldsPrefix(j.s.Prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading budget holds: %w", err)
	}
	out := make([]*budgetRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		r := &budgetRecord{}
		if err := json.Unmarshal(kv.Value, r); err != nil {
			return nil, fmt.Errorf("budget hold %s is unreadable: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// AdmitBudget decides, with the engine's other decisions, whether a grant an
// organization's owners write fits their organization's delegable budget.
// A grant that fits is held, in memory and in the journal, before AdmitBudget
// returns. With dryRun nothing is held.
func (h *Handle) AdmitBudget(ctx context.Context, g *quotav1alpha1.ResourceGrant, dryRun bool) (quota.BudgetResult, error) {
	t := h.term.Load()
	if t == nil || t.journal == nil {
		return quota.BudgetResult{}, ErrNotLeader
	}
	qg := convert.Grant(g)
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return quota.BudgetResult{}, ErrNotLeader
	}
	res := t.eng.CheckBudget(qg)
	if !res.OK || dryRun || qg.Budget == nil {
		t.mu.Unlock()
		return res, nil
	}
	t.eng.HoldBudget(qg)
	rec := newBudgetRecord(qg)
	t.budgetRecords[rec.key()] = rec
	t.mu.Unlock()
	// Journal writes of holds are serialized, so that a settled hold's key
	// is never deleted after a newer hold of the same grant wrote it.
	t.budgetMu.Lock()
	defer t.budgetMu.Unlock()
	if err := t.journal.recordBudgetHold(ctx, rec); err != nil {
		// Not recorded: nothing is held, the grant is refused ("retry").
		t.mu.Lock()
		t.eng.ReleaseBudgetHold(qg)
		if t.budgetRecords[rec.key()] == rec {
			delete(t.budgetRecords, rec.key())
		}
		t.mu.Unlock()
		if errors.Is(err, errDeposed) {
			return quota.BudgetResult{}, ErrNotLeader
		}
		return quota.BudgetResult{}, err
	}
	if cr, _ := ctx.Value(createRecordKey{}).(*CreateRecord); cr != nil {
		cr.mu.Lock()
		cr.budgets = append(cr.budgets, qg)
		cr.mu.Unlock()
	}
	return res, nil
}

// holdBudget restores a hold recorded by this or an earlier leader, before
// any grant is seen.
func (t *term) holdBudget(r *budgetRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.eng.HoldBudget(r.grant())
	t.budgetRecords[r.key()] = r
}

// budgetEnded settles the budget holds of a request that ended: a refused
// grant is released at once; a stored one is settled by the grant informer;
// one whose end is unclear is looked up once the request can no longer be
// writing it.
func (t *term) budgetEnded(holds []quota.Grant, out outcome) {
	switch out {
	case outcomeStored:
		go t.settleBudgetRecords()
		return
	case outcomeRefused:
		t.mu.Lock()
		for _, g := range holds {
			t.eng.ReleaseBudgetHold(g)
		}
		t.mu.Unlock()
		go t.settleBudgetRecords()
		return
	}
	go t.lookUpBudgetHolds(holds, budgetLookupDelay)
}

// lookUpBudgetHolds releases, after delay, each hold whose grant is not
// stored (at its UID and generation or later).
func (t *term) lookUpBudgetHolds(holds []quota.Grant, delay time.Duration) {
	select {
	case <-t.ctx.Done():
		return
	case <-time.After(delay):
	}
	for _, g := range holds {
		var got quotav1alpha1.ResourceGrant
		err := t.r.client.Get(t.ctx, clientKey(g.Namespace, g.Name), &got)
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(t.ctx).Error(err, "Looking up a grant whose request ended unclearly; its budget stays held until the next leader", "grant", g.Namespace+"/"+g.Name)
			continue
		}
		t.mu.Lock()
		if apierrors.IsNotFound(err) || string(got.UID) != g.UID || got.Generation < g.Generation {
			t.eng.ReleaseBudgetHold(g)
		}
		t.mu.Unlock()
	}
	t.settleBudgetRecords()
	t.kickNow()
}

// settleBudgetRecords deletes the journal keys of holds the engine no longer
// has (settled by the stored grant, or released).
func (t *term) settleBudgetRecords() {
	if t.journal == nil {
		return
	}
	t.budgetMu.Lock()
	defer t.budgetMu.Unlock()
	var done []*budgetRecord
	t.mu.Lock()
	for k, r := range t.budgetRecords {
		if h, ok := t.eng.BudgetHold(k); !ok || h.UID != r.UID || h.Generation != r.Generation {
			done = append(done, r)
			delete(t.budgetRecords, k)
		}
	}
	t.mu.Unlock()
	if len(done) == 0 {
		return
	}
	var ops []clientv3.Op
	for _, r := range done {
		// Only the key of this hold: a newer hold of the same grant keeps its own.
		ops = append(ops, clientv3.OpDelete(t.journal.budgetKey(r.key())))
	}
	for len(ops) > 0 {
		n := min(len(ops), maxJournalOps)
		if err := t.journal.commit(t.ctx, ops[:n], nil); err != nil {
			klog.FromContext(t.ctx).V(1).Info("Deleting settled budget holds failed; the next leader looks them up", "err", err)
			return
		}
		ops = ops[n:]
	}
}

// budgetLookupDelay is how long after an unclear end a grant is looked up:
// longer than a request can still be writing.
const budgetLookupDelay = 70 * time.Second
