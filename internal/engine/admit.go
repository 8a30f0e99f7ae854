package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Labels and annotations of claims made by admission.
const (
	// AnnotationResource is the object's resource.version.group.
	AnnotationResource = "quota.miloapis.com/resource"
	// AnnotationResourceUID is the object's UID.
	AnnotationResourceUID = "quota.miloapis.com/resource-uid"
	// AnnotationPolicy names the ClaimCreationPolicy that made the claim.
	AnnotationPolicy = "quota.miloapis.com/policy"
)

// ErrNotLeader means this replica's engine is not deciding now (another
// replica leads, or leadership is changing); the caller should retry.
var ErrNotLeader = errors.New("the quota engine on this server is not the deciding replica right now")

// Handle connects the engine to the API server it runs in: admission asks
// it for decisions, and it writes admission's grants and claims straight
// into that server's storage.
type Handle struct {
	term    atomic.Pointer[term]
	storage atomic.Pointer[Storage]
}

// UseStorage gives the engine the server's etcd. Without it the engine
// answers admission with ErrNotLeader (the create is refused as "retry").
func (h *Handle) UseStorage(s *Storage) { h.storage.Store(s) }

// NewHandle returns a handle; pass it in Options.Handle.
func NewHandle() *Handle { return &Handle{} }

// AdmitResult is the decision on the claims of one create.
type AdmitResult struct {
	Granted bool
	// Decisions, in the order of the claims asked for.
	Decisions []quota.Decision
	// Claims are the claims as decided (created ones carry their names).
	Claims []quota.Claim
	// Buckets hold, for a denial, the numbers of the bucket that was short.
	Limits []quota.BucketStatus
}

// Admit decides the claims of one create together: all are granted or none.
// With dryRun nothing is recorded or allocated. Otherwise a grant is durable
// (in the journal) before Admit returns, and the claims are written once the
// object is stored; a denial writes nothing: a refused create leaves no
// claim behind.
func (h *Handle) Admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (AdmitResult, error) {
	t := h.term.Load()
	if t == nil || t.journal == nil {
		return AdmitResult{}, ErrNotLeader
	}
	if dryRun {
		return t.evaluate(claims), nil
	}
	return t.admit(ctx, claims)
}

// evaluate decides claims without keeping anything.
func (t *term) evaluate(claims []*quotav1alpha1.ResourceClaim) AdmitResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	uids := make([]string, len(claims))
	res := AdmitResult{}
	for i, c := range claims {
		qc := toClaim(c)
		qc.UID = "dry-run-" + rand.String(12)
		qc.Created = time.Now()
		uids[i] = qc.UID
		t.eng.AddClaim(qc)
		res.Claims = append(res.Claims, qc)
	}
	decisions, ok := t.eng.DecideTogether(uids)
	res.Granted = ok
	for _, uid := range uids {
		res.Decisions = append(res.Decisions, decisions[uid])
		t.eng.RemoveClaim(uid)
	}
	return res
}

// admit decides the claims of one create in memory and records the grant in
// the journal: one small key per claim, written in a transaction shared by
// every concurrent request and fenced by the ledger. Nothing else is written
// in the request: the claims are written after the object is stored,
// already decided and owned by it. A denial writes nothing at all.
func (t *term) admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (AdmitResult, error) {
	// Back-pressure: wait while too many admitted claims are not written yet.
	for {
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			return AdmitResult{}, ErrNotLeader
		}
		if len(t.pending) < maxPending {
			break
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return AdmitResult{}, ErrBusy
		case <-time.After(5 * time.Millisecond):
		}
	}
	now := metav1.Now()
	res := AdmitResult{}
	var ids []string
	var entries []*pendingClaim
	for _, c := range claims {
		p := newPendingClaim(c, now)
		if _, dup := t.pending[p.key()]; dup || c.Name == "" {
			for _, id := range ids {
				t.eng.RemoveClaim(id)
			}
			t.mu.Unlock()
			return AdmitResult{}, fmt.Errorf("claim %s is already being admitted", p.key())
		}
		qc := toClaim(c)
		qc.UID, qc.Created = provisionalID(p.key()), now.Time
		t.eng.AddClaim(qc)
		ids = append(ids, qc.UID)
		entries = append(entries, p)
		res.Claims = append(res.Claims, qc)
	}
	decisions, ok := t.eng.DecideTogether(ids)
	res.Granted = ok
	for _, id := range ids {
		res.Decisions = append(res.Decisions, decisions[id])
	}
	if !ok {
		for _, id := range ids {
			t.eng.RemoveClaim(id)
		}
		t.mu.Unlock()
		return res, nil
	}
	for _, p := range entries {
		t.pending[p.key()] = p
	}
	t.mu.Unlock()
	written := t.writeJournal(ctx, &journalOps{grants: entries})
	// Even when the write failed it may have landed: the grant is held until
	// the create's end is reported (or its object is looked up), then
	// written as a claim or released.
	noteGrants(ctx, entries)
	for _, p := range entries {
		t.materialize.AddAfter(p.key(), recheckPeriod)
	}
	t.kickNow() // buckets changed
	if written.err != nil {
		return AdmitResult{}, written.err
	}
	return res, nil
}

// maxPending bounds the claims admitted and not written yet: the work the
// materializers have left. Admission waits (and at its deadline answers
// "retry") rather than let it grow.
const maxPending = 2000

// ErrBusy means too many grants wait to be written; the caller should retry.
var ErrBusy = errors.New("the quota engine has too many grants waiting to be written")

func provisionalID(claimKey string) string { return "admission:" + claimKey }

// holdPending restores a grant recorded at admission (by this or an earlier
// leader) under its provisional ID.
func (t *term) holdPending(p *pendingClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, CreationTimestamp: p.Created}, Spec: p.Spec}
	qc := toClaim(c)
	qc.UID = provisionalID(p.key())
	t.pending[p.key()] = p
	t.eng.RestoreGranted(qc)
}

// adoptLocked renames a pending grant to the UID of its written claim: the
// claim, stored granted, replaced the grant in the journal. It reports
// whether c was such a claim. t.mu must be held.
func (t *term) adoptLocked(c *quotav1alpha1.ResourceClaim) bool {
	k := key(c.Namespace, c.Name)
	p, ok := t.pending[k]
	if !ok || c.Annotations[AnnotationResourceUID] != p.ObjectUID || !isGranted(c) {
		return false
	}
	uid := string(c.UID)
	if !t.eng.Rekey(provisionalID(k), uid) {
		return false
	}
	delete(t.pending, k)
	t.claimKeys[uid] = k
	return true
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
