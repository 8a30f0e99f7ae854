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

// Handle lets in-process admission ask this replica's engine for decisions.
type Handle struct {
	term atomic.Pointer[term]
}

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
// With dryRun nothing is created or allocated. Otherwise granted claims are
// created and recorded in the ledger before Admit returns, and denied ones
// are deleted again: a refused create leaves no claim behind.
func (h *Handle) Admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim, dryRun bool) (AdmitResult, error) {
	t := h.term.Load()
	if t == nil {
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
// the ledger (one write shared by every concurrent request). Nothing else is
// written in the request: the claims are created after the object is
// stored, already owned by it. A denial writes nothing at all.
func (t *term) admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (AdmitResult, error) {
	// Back-pressure: wait while too many admitted claims are not created yet
	// (each is carried whole in every ledger write).
	for {
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			return AdmitResult{}, ErrNotLeader
		}
		if len(t.pending) < maxPending && len(t.inflight)+len(t.pending) < maxInflight {
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
	if err := t.commit(ctx); err != nil {
		// Perhaps not recorded: release. Should the record have landed after
		// all, the next leader holds the grant until its object fails to appear.
		t.mu.Lock()
		for i, p := range entries {
			delete(t.pending, p.key())
			t.eng.RemoveClaim(ids[i])
		}
		t.mu.Unlock()
		return AdmitResult{}, err
	}
	for _, p := range entries {
		t.materialize.AddAfter(p.key(), materializeDelay)
	}
	t.kickNow() // buckets changed
	return res, nil
}

// maxPending bounds admitted claims not created yet: about 350 bytes each in
// every ledger write (with maxInflight's small entries, well under 1 MiB).
const maxPending = 1500

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

// adoptLocked renames a pending grant to the UID of its created claim.
// It reports whether c was such a claim. t.mu must be held.
func (t *term) adoptLocked(c *quotav1alpha1.ResourceClaim) bool {
	k := key(c.Namespace, c.Name)
	p, ok := t.pending[k]
	if !ok || c.Annotations[AnnotationResourceUID] != p.ObjectUID {
		return false
	}
	uid := string(c.UID)
	if !t.eng.Rekey(provisionalID(k), uid) {
		return false
	}
	delete(t.pending, k)
	t.claimKeys[uid] = k
	t.inflight[uid] = k // granted; recorded as pending until the next record
	t.claims.Add(uid)
	return true
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
