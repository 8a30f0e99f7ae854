package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
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
	// AnnotationPolicyGeneration is the generation of that policy which
	// computed the claim.
	AnnotationPolicyGeneration = "quota.miloapis.com/policy-generation"
	// AnnotationGrantKey is set on a claim written under another name than
	// the one admitted (the admitted name was taken meanwhile): it is the
	// namespace/name its grant was recorded under.
	AnnotationGrantKey = "quota.miloapis.com/admitted-as"
)

// grantKeyOf is the namespace/name under which a claim's grant was recorded
// at admission.
func grantKeyOf(c *quotav1alpha1.ResourceClaim) string {
	if k := c.Annotations[AnnotationGrantKey]; k != "" {
		return k
	}
	return key(c.Namespace, c.Name)
}

// NameTakenError refuses a create whose policy renders a claim name that is
// already used (by a stored claim, a claim being admitted, or another claim
// of the same create). Admitting it would store the object uncharged.
type NameTakenError struct {
	// Claim is namespace/name; Policy the ClaimCreationPolicy that rendered it.
	Claim, Policy string
	// By says what holds the name.
	By string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("ClaimCreationPolicy %s renders the claim name %s, which is taken by %s", e.Policy, e.Claim, e.By)
}

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
		qc := convert.Claim(c)
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
	refuse := func(err error) (AdmitResult, error) {
		for _, id := range ids {
			t.eng.RemoveClaim(id)
		}
		t.mu.Unlock()
		return AdmitResult{}, err
	}
	seen := map[string]string{}
	for _, c := range claims {
		p := newPendingClaim(c, now)
		k := p.key()
		switch {
		case c.Name == "":
			return refuse(fmt.Errorf("ClaimCreationPolicy %s rendered a claim without a name", p.Policy))
		case seen[k] != "":
			return refuse(&NameTakenError{Claim: k, Policy: p.Policy, By: "the claim ClaimCreationPolicy " + seen[k] + " renders for the same create"})
		case t.pending[k] != nil:
			return refuse(&NameTakenError{Claim: k, Policy: p.Policy, By: "a claim being admitted for another create"})
		case t.claimStored(k):
			return refuse(&NameTakenError{Claim: k, Policy: p.Policy, By: "a stored ResourceClaim"})
		}
		seen[k] = p.Policy
		qc := convert.Claim(c)
		qc.UID, qc.Created = provisionalID(k), now.Time
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
		t.addPendingLocked(p)
	}
	t.mu.Unlock()
	written := t.writeJournal(ctx, &journalOps{grants: entries})
	if written.err == nil {
		for _, p := range entries {
			if _, taken := written.exists[p.key()]; taken {
				// Stored (or admitted) since the cache was read: refuse,
				// and give back what this create's other claims got.
				t.giveBack(ctx, entries, written.exists)
				return AdmitResult{}, &NameTakenError{Claim: p.key(), Policy: p.Policy, By: "a stored ResourceClaim or a claim being admitted"}
			}
		}
	}
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

// claimStored reports whether the cache holds a claim of that key. t.mu
// must be held (the informer store has its own lock; this only reads it).
func (t *term) claimStored(k string) bool {
	if t.claimInformer == nil {
		return false
	}
	_, exists, _ := t.claimInformer.GetStore().GetByKey(k)
	return exists
}

// giveBack forgets the grants of a create refused after they were decided.
// The journal refused the keys in taken (they belong to someone else); the
// others this create wrote, and deletes again.
func (t *term) giveBack(ctx context.Context, entries []*pendingClaim, taken map[string]error) {
	var releases []string
	t.mu.Lock()
	for _, p := range entries {
		k := p.key()
		if t.pending[k] == p {
			t.forgetPendingLocked(p)
		} else if p.Update {
			t.eng.RemoveClaim(p.growthID())
		} else {
			t.eng.RemoveClaim(provisionalID(k))
		}
		if _, ok := taken[k]; !ok {
			releases = append(releases, k)
		}
	}
	t.mu.Unlock()
	if res := t.writeJournal(ctx, &journalOps{releases: releases}); res.err != nil {
		klog.FromContext(ctx).Error(res.err, "Releasing the grants of a refused create failed; they are released when the leader changes", "claims", releases)
	}
	t.kickNow()
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
	t.addPendingLocked(p)
	if p.Update {
		if len(p.Growth) > 0 {
			t.eng.RestoreGranted(p.growthClaim())
		}
		return
	}
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, CreationTimestamp: p.Created}, Spec: p.Spec}
	qc := convert.Claim(c)
	qc.UID = provisionalID(p.key())
	t.eng.RestoreGranted(qc)
}

// adoptLocked renames a pending grant to the UID of its written claim: the
// claim, stored granted, replaced the grant in the journal. It reports
// whether c was such a claim. t.mu must be held.
func (t *term) adoptLocked(c *quotav1alpha1.ResourceClaim) bool {
	k := grantKeyOf(c)
	p, ok := t.pending[k]
	if ok && p.Update {
		return t.adoptUpdateLocked(p, c)
	}
	if !ok || c.Annotations[AnnotationResourceUID] != p.ObjectUID || !convert.IsGranted(c) {
		return false
	}
	uid := string(c.UID)
	if !t.eng.Rekey(provisionalID(k), uid) {
		return false
	}
	t.dropPendingLocked(p)
	t.claimKeys[uid] = key(c.Namespace, c.Name)
	t.indexClaimLocked(c)
	return true
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
