package admit

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// maxPending bounds the claims admitted and not written yet: the work the
// settlers have left. Admission waits (and at its deadline answers "retry")
// rather than let it grow.
const maxPending = 2000

// evaluate decides claims without keeping anything.
func (t *Term) Evaluate(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (route.AdmitResult, error) {
	if err := t.lockCurrent(ctx); err != nil {
		return route.AdmitResult{}, err
	}
	defer t.Cache.Unlock()
	acc := t.Cache.AccountsLocked()
	uids := make([]string, len(claims))
	res := route.AdmitResult{}
	for i, c := range claims {
		qc := convert.Claim(c)
		qc.UID = "dry-run-" + rand.String(12)
		qc.Created = time.Now()
		uids[i] = qc.UID
		acc.AddClaim(qc)
		res.Claims = append(res.Claims, qc)
	}
	decisions, ok := acc.DecideTogether(uids)
	res.Granted = ok
	for _, uid := range uids {
		res.Decisions = append(res.Decisions, decisions[uid])
		acc.RemoveClaim(uid)
	}
	return res, nil
}

// lockWithRoom takes the cache's lock once fewer than maxPending admitted
// claims wait to be written (back-pressure), and the grants' windows are
// current (lockCurrent).
func (t *Term) lockWithRoom(ctx context.Context) error {
	for {
		if err := t.lockCurrent(ctx); err != nil {
			return err
		}
		if t.Cache.PendingCountLocked() < maxPending {
			return nil
		}
		t.Cache.Unlock()
		select {
		case <-ctx.Done():
			return route.ErrBusy
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// lockCurrent takes the cache's lock once every grant counts as its window
// says now: a window that started or ended since the decide loop last looked
// is first recorded there (the loop is woken, and this waits for it), so no
// decision counts a grant past its end or before its recorded start,
// whatever the loop's period (docs/exactly-once.md, "Grant windows").
func (t *Term) lockCurrent(ctx context.Context) error {
	for {
		t.Cache.Lock()
		if t.Cache.StoppedLocked() {
			t.Cache.Unlock()
			return route.ErrNotLeader
		}
		if t.Cache.WindowsCurrentLocked(t.now()) {
			return nil
		}
		t.Cache.Unlock()
		t.Cache.Notify()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: a grant's window started or ended and its new phase is still being recorded", route.ErrBusy)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// now is the clock grant windows are judged by.
func (t *Term) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// admit decides the claims of one create in memory and records the grant in
// the journal: one small key per claim, written in a transaction shared by
// every concurrent request and fenced by the ledger. Nothing else is written
// in the request: the claims are written after the object is stored,
// already decided and owned by it. A denial writes nothing at all.
func (t *Term) Admit(ctx context.Context, claims []*quotav1alpha1.ResourceClaim) (route.AdmitResult, error) {
	for {
		if err := t.lockWithRoom(ctx); err != nil {
			return route.AdmitResult{}, err
		}
		res, entries, again := t.grantedBeforeLocked(claims)
		if again == attemptNew {
			break // decided below, the lock held
		}
		t.Cache.Unlock()
		if again == attemptGranted {
			klog.FromContext(ctx).Info("A create asked again (a retry across a timeout or a change of leader) is answered with its earlier grant", "claim", formats.Key(claims[0].Namespace, claims[0].Name))
			// The same object UID is the same API request: its end
			// settles these grants (a grant read from the journal has no
			// request here otherwise, and waits for the hold period).
			route.NoteGrants(ctx, entries)
			return res, nil
		}
		// Its first grant's journal write has not finished: wait for it
		// rather than refuse the retry as a name collision.
		select {
		case <-ctx.Done():
			return route.AdmitResult{}, fmt.Errorf("%w: the grant of an earlier attempt of this create is still being recorded", route.ErrObjectBusy)
		case <-time.After(5 * time.Millisecond):
		}
	}
	entries, res, err := t.decideCreateLocked(claims, metav1.Now())
	t.Cache.Unlock()
	if err != nil || !res.Granted {
		return res, err
	}
	if err := t.record(ctx, entries, "a stored ResourceClaim or a claim being admitted"); err != nil {
		return route.AdmitResult{}, err
	}
	return res, nil
}

// decideCreateLocked decides claims together and, when all are granted,
// holds them as pending entries. The cache's lock is held.
func (t *Term) decideCreateLocked(claims []*quotav1alpha1.ResourceClaim, now metav1.Time) ([]*formats.PendingClaim, route.AdmitResult, error) {
	acc := t.Cache.AccountsLocked()
	res := route.AdmitResult{}
	var ids []string
	var entries []*formats.PendingClaim
	undo := func() {
		for _, id := range ids {
			acc.RemoveClaim(id)
		}
	}
	seen := map[string]string{}
	for _, c := range claims {
		p := formats.NewPendingClaim(c, now)
		k := p.Key()
		var taken *route.NameTakenError
		switch {
		case c.Name == "":
			undo()
			return nil, route.AdmitResult{}, fmt.Errorf("ClaimCreationPolicy %s rendered a claim without a name", p.Policy)
		case seen[k] != "":
			taken = &route.NameTakenError{Claim: k, Policy: p.Policy, By: "the claim ClaimCreationPolicy " + seen[k] + " renders for the same create"}
		case t.Cache.PendingLocked(k) != nil:
			taken = &route.NameTakenError{Claim: k, Policy: p.Policy, By: "a claim being admitted for another create"}
		case t.Cache.ClaimStoredLocked(k):
			taken = &route.NameTakenError{Claim: k, Policy: p.Policy, By: "a stored ResourceClaim"}
		}
		if taken != nil {
			undo()
			return nil, route.AdmitResult{}, taken
		}
		seen[k] = p.Policy
		qc := convert.Claim(c)
		qc.UID, qc.Created = formats.ProvisionalID(k), now.Time
		acc.AddClaim(qc)
		ids = append(ids, qc.UID)
		entries = append(entries, p)
		res.Claims = append(res.Claims, qc)
	}
	decisions, ok := acc.DecideTogether(ids)
	res.Granted = ok
	for _, id := range ids {
		res.Decisions = append(res.Decisions, decisions[id])
	}
	if !ok {
		undo()
		return nil, res, nil
	}
	for _, p := range entries {
		t.Cache.AddPendingLocked(p)
	}
	return entries, res, nil
}

// record writes the grants of entries to the journal and hands them to
// settling. Even when the write failed it may have landed: the grant is held
// until the request's end is reported (or its object is looked up), then
// written as a claim or released. A name found taken by the journal's own
// check (by takenBy) refuses the request, and gives back what its other
// claims got.
func (t *Term) record(ctx context.Context, entries []*formats.PendingClaim, takenBy string) error {
	written := t.Committer.Write(ctx, &fence.Ops{Grants: entries})
	if written.Err == nil {
		for _, p := range entries {
			if _, taken := written.Exists[p.Key()]; taken {
				t.giveBack(ctx, entries, written.Exists)
				return &route.NameTakenError{Claim: p.Key(), Policy: p.Policy, By: takenBy}
			}
		}
	}
	if written.Err == nil {
		t.Cache.Lock()
		for _, p := range entries {
			p.Durable = true
		}
		t.Cache.Unlock()
	}
	route.NoteGrants(ctx, entries)
	for _, p := range entries {
		t.SettleLater(p.Key())
	}
	t.Cache.Notify() // buckets changed
	if written.Err != nil && ctx.Err() == nil && (errors.Is(written.Err, context.Canceled) || errors.Is(written.Err, fence.ErrDeposed)) {
		// The term ended under the write (its Lease lost): the next
		// leader decides, and holds this grant if the write landed.
		return fmt.Errorf("%w: leadership ended while the grant was being recorded (%v)", route.ErrNotLeader, written.Err)
	}
	return written.Err
}

// giveBack forgets the grants of a request refused after they were decided.
// The journal refused the keys in taken (they belong to someone else); the
// others this request wrote, and deletes again.
func (t *Term) giveBack(ctx context.Context, entries []*formats.PendingClaim, taken map[string]error) {
	var releases []string
	t.Cache.Lock()
	acc := t.Cache.AccountsLocked()
	for _, p := range entries {
		k := p.Key()
		switch {
		case t.Cache.PendingLocked(k) == p:
			t.Cache.ForgetPendingLocked(p)
		case p.Update:
			acc.RemoveClaim(p.GrowthID())
		default:
			acc.RemoveClaim(formats.ProvisionalID(k))
		}
		if _, ok := taken[k]; !ok {
			releases = append(releases, k)
		}
	}
	t.Cache.Unlock()
	if res := t.Committer.Write(ctx, &fence.Ops{Releases: releases}); res.Err != nil {
		klog.FromContext(ctx).Error(res.Err, "Releasing the grants of a refused request failed; they are released when the leader changes", "claims", releases)
	}
	t.Cache.Notify()
}
