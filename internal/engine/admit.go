package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Labels and annotations of claims made by admission.
const (
	// LabelBinding is "pending" on a claim made by admission until the
	// object it is for is confirmed stored and owns the claim.
	LabelBinding = "quota.miloapis.com/binding"
	// AnnotationResource is the object's resource.version.group.
	AnnotationResource = "quota.miloapis.com/resource"
	// AnnotationResourceUID is the object's UID.
	AnnotationResourceUID = "quota.miloapis.com/resource-uid"
	// AnnotationPolicy names the ClaimCreationPolicy that made the claim.
	AnnotationPolicy = "quota.miloapis.com/policy"
	bindingPending   = "pending"
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

func (t *term) admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (AdmitResult, error) {
	var created []*quotav1alpha1.ResourceClaim
	cleanup := func() {
		for _, c := range created {
			t.forget(c)
			_ = t.r.client.Delete(context.Background(), c, client.Preconditions{UID: &c.UID})
		}
	}
	for _, c := range claims {
		c = c.DeepCopy()
		if err := t.r.client.Create(ctx, c); err != nil {
			cleanup()
			return AdmitResult{}, fmt.Errorf("creating the ResourceClaim: %w", err)
		}
		created = append(created, c)
	}
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		cleanup()
		return AdmitResult{}, ErrNotLeader
	}
	uids := make([]string, len(created))
	res := AdmitResult{}
	for i, c := range created {
		uid := string(c.UID)
		uids[i] = uid
		t.claimKeys[uid] = key(c.Namespace, c.Name)
		qc := toClaim(c)
		t.eng.AddClaim(qc)
		res.Claims = append(res.Claims, qc)
	}
	decisions, ok := t.eng.DecideTogether(uids)
	res.Granted = ok
	for _, uid := range uids {
		res.Decisions = append(res.Decisions, decisions[uid])
		if ok {
			t.inflight[uid] = t.claimKeys[uid]
		}
	}
	t.mu.Unlock()
	if !ok {
		cleanup()
		t.kickNow()
		return res, nil
	}
	if err := t.commit(ctx); err != nil {
		// Not recorded: the grant does not exist. Release it and remove the claims.
		cleanup()
		return AdmitResult{}, err
	}
	for _, uid := range uids {
		t.claims.Add(uid)
		t.binds.AddAfter(uid, bindDelay)
	}
	t.kickNow() // buckets changed
	return res, nil
}

// forget removes a claim made by admission that will be deleted, so that its
// later events do not bring it back.
func (t *term) forget(c *quotav1alpha1.ResourceClaim) {
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := string(c.UID)
	t.tombstones[types.UID(uid)] = time.Now()
	delete(t.inflight, uid)
	delete(t.claimKeys, uid)
	t.eng.RemoveClaim(uid)
}

// isNotFoundOrGone reports errors that mean the object is gone.
func isNotFoundOrGone(err error) bool { return apierrors.IsNotFound(err) || apierrors.IsGone(err) }
