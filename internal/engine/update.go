package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// An update of an object changes what the policies charge for it (a machine
// resized, a deployment scaled). Its claims are replaced, never edited: the
// claims the policies computed for the object as it was are replaced by the
// claim they compute for it as it is now, in one etcd transaction written once
// the update is stored. Until then the engine holds, besides the old claims,
// only the growth (what the new claim asks beyond what the old ones hold), so
// that a resize up needs room for the difference only, a resize down frees
// nothing before the smaller object is stored, and no moment exists in which
// both the old and the new claim, or neither, count. docs/exactly-once.md,
// "Updates", has the argument.

// ObjectRef names the object an update changes.
type ObjectRef struct {
	APIGroup, Kind string
	// Resource is resource.version.group (FormatGVR) of the object itself,
	// also for an update through its scale subresource.
	Resource        string
	Namespace, Name string
	UID             string
}

// UpdateCheck is what a later leader needs to find out whether an update was
// stored: the version of the policy that computed the new claim, and the
// request's user and requestInfo its expressions read. Evaluated on the
// stored object, it renders the new claim exactly when the update is stored.
type UpdateCheck struct {
	Generation  int64                     `json:"g"`
	Trigger     quotav1alpha1.Trigger     `json:"t"`
	Target      quotav1alpha1.ClaimTarget `json:"x"`
	User        map[string]any            `json:"u,omitempty"`
	RequestInfo map[string]any            `json:"r,omitempty"`
}

// PolicyChange is what one policy charges for an updated object.
type PolicyChange struct {
	Policy string
	// Claim is the claim the policy renders for the object as updated; nil
	// when the policy no longer applies to it.
	Claim *quotav1alpha1.ResourceClaim
	Check UpdateCheck
}

// ChangeResult is the outcome of one policy's change.
type ChangeResult struct {
	Policy string
	// Old and New are what the object holds before and after, by cell.
	Old, New map[quota.Cell]int64
	// Decision is the decision on the growth, when there is growth.
	Decision *quota.Decision
}

// UpdateResult is the decision on an update.
type UpdateResult struct {
	Granted bool
	Changes []ChangeResult
}

// updateReadmissions counts updates admitted again in the same request (the
// storage retried after a conflict): their earlier decision was undone.
var updateReadmissions = metrics.NewCounter(&metrics.CounterOpts{
	Name:           "milo_quota_update_readmissions_total",
	Help:           "Updates whose admission ran again in the same request after a storage conflict; the earlier decision was undone first.",
	StabilityLevel: metrics.ALPHA,
})

var registerUpdateMetrics sync.Once

// ErrObjectBusy means another change of the same object is being decided
// and did not settle in time; the caller should retry.
var ErrObjectBusy = errors.New("another change of this object is still being charged")

// AdmitUpdate decides the policies' changes for one update of obj together:
// all are granted, or none is and nothing is held. A change that grows needs
// room for its growth; one that shrinks or stops is granted at once and
// releases only once the update is stored. With dryRun nothing is kept.
// Admission of an update can run again in the same request (the storage
// retries on a conflict): the request's earlier decision is undone first.
func (h *Handle) AdmitUpdate(ctx context.Context, obj ObjectRef, changes []PolicyChange, dryRun bool) (UpdateResult, error) {
	registerUpdateMetrics.Do(func() { legacyregistry.MustRegister(updateReadmissions) })
	t := h.term.Load()
	if t == nil || t.journal == nil {
		return UpdateResult{}, ErrNotLeader
	}
	return t.admitUpdate(ctx, obj, changes, dryRun)
}

// UndoEarlierAttempt undoes what an earlier run of admission decided for an
// update of obj in this same request: admission runs again when the storage
// retries on a conflict, and the newer object may need a different change, or
// none. It costs nothing when the request decided nothing for the object.
func (h *Handle) UndoEarlierAttempt(ctx context.Context, objectUID string) error {
	rec, _ := ctx.Value(createRecordKey{}).(*CreateRecord)
	if rec == nil || rec.empty() {
		return nil
	}
	t := h.term.Load()
	if t == nil || t.journal == nil {
		return nil // a new leader settles them by looking the object up
	}
	_, err := t.admitUpdate(ctx, ObjectRef{UID: objectUID}, nil, false)
	return err
}

func (t *term) admitUpdate(ctx context.Context, obj ObjectRef, changes []PolicyChange, dryRun bool) (UpdateResult, error) {
	rec, _ := ctx.Value(createRecordKey{}).(*CreateRecord)
	// One change of an object at a time: a change waits until every earlier
	// one (a create or an update whose claims are not written yet) settled,
	// so each is decided against what the object really holds.
	var mine []*pendingClaim
	for {
		t.mu.Lock()
		if t.stopped {
			t.mu.Unlock()
			return UpdateResult{}, ErrNotLeader
		}
		var others bool
		mine, others = t.pendingOfObject(obj.UID, rec)
		if _, busy := t.updating[obj.UID]; !others && !busy {
			break
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return UpdateResult{}, ErrObjectBusy
		case <-time.After(5 * time.Millisecond):
		}
	}
	if dryRun {
		defer t.mu.Unlock()
		return t.decideChangesLocked(obj, changes, nil, true)
	}
	t.updateSeq++
	token := t.updateSeq
	t.updating[obj.UID] = token
	done := func() {
		t.mu.Lock()
		if t.updating[obj.UID] == token {
			delete(t.updating, obj.UID)
		}
		t.mu.Unlock()
	}
	defer done()
	if len(mine) > 0 {
		// This request's earlier attempt: undone before deciding again.
		updateReadmissions.Inc()
		var keys []string
		for _, p := range mine {
			t.forgetPendingLocked(p)
			keys = append(keys, p.key())
		}
		t.mu.Unlock()
		if res := t.writeJournal(ctx, &journalOps{releases: keys}); res.err != nil {
			return UpdateResult{}, res.err
		}
		t.kickNow()
		t.mu.Lock()
	}
	var entries []*pendingClaim
	res, err := t.decideChangesLocked(obj, changes, &entries, false)
	t.mu.Unlock()
	if err != nil || !res.Granted || len(entries) == 0 {
		return res, err
	}
	written := t.writeJournal(ctx, &journalOps{grants: entries})
	if written.err == nil {
		for _, p := range entries {
			if _, taken := written.exists[p.key()]; taken {
				t.giveBack(ctx, entries, written.exists)
				return UpdateResult{}, &NameTakenError{Claim: p.key(), Policy: p.Policy, By: "a ResourceClaim stored or admitted meanwhile"}
			}
		}
	}
	noteGrants(ctx, entries)
	for _, p := range entries {
		t.materialize.AddAfter(p.key(), recheckPeriod)
	}
	t.kickNow()
	if written.err != nil {
		return UpdateResult{}, written.err
	}
	return res, nil
}

// decideChangesLocked decides the growth of every change together and, unless
// dryRun, holds it and records each change as a pending entry. t.mu is held.
func (t *term) decideChangesLocked(obj ObjectRef, changes []PolicyChange, entries *[]*pendingClaim, dryRun bool) (UpdateResult, error) {
	res := UpdateResult{Granted: true}
	now := metav1.Now()
	var ids []string
	var planned []*pendingClaim
	for _, ch := range changes {
		olds := t.claimsOfObjectLocked(obj.UID, ch.Policy)
		var oldQ []quota.Claim
		for _, o := range olds {
			oldQ = append(oldQ, o.claim)
		}
		cr := ChangeResult{Policy: ch.Policy, Old: quota.Holding(oldQ...), New: map[quota.Cell]int64{}}
		var newQ []quota.Claim
		if ch.Claim != nil {
			newQ = []quota.Claim{convert.Claim(ch.Claim)}
			cr.New = quota.Holding(newQ...)
		}
		if quota.SameHolding(oldQ, newQ) && (ch.Claim == nil) == (len(olds) == 0) {
			res.Changes = append(res.Changes, cr)
			continue // holds exactly what it should: nothing to do
		}
		if ch.Claim == nil && len(olds) == 0 {
			res.Changes = append(res.Changes, cr)
			continue
		}
		p := &pendingClaim{Policy: ch.Policy, Resource: obj.Resource, ObjectUID: obj.UID, Created: now, Update: true, Check: &ch.Check,
			ClaimUID: string(uuid.NewUUID())}
		for _, o := range olds {
			p.Replaces = append(p.Replaces, o.ref)
		}
		if ch.Claim == nil {
			p.Namespace, p.Name, p.Release = olds[0].ref.Namespace, olds[0].ref.Name, true
			p.Spec.ResourceRef = &quotav1alpha1.ResourceRef{APIGroup: obj.APIGroup, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name}
		} else {
			c := ch.Claim
			p.Namespace, p.Name, p.Spec = c.Namespace, t.replacementName(c, obj, ch.Policy, olds), c.Spec
			if p.Name == "" {
				t.undoLocked(ids)
				return UpdateResult{}, &NameTakenError{Claim: key(c.Namespace, c.Name), Policy: ch.Policy, By: "other claims (and the name derived from the object)"}
			}
			if len(c.Labels) > 0 {
				p.Labels = c.Labels
			}
			for k, v := range c.Annotations {
				if k != AnnotationPolicy && k != AnnotationResource && k != AnnotationResourceUID {
					if p.Extra == nil {
						p.Extra = map[string]string{}
					}
					p.Extra[k] = v
				}
			}
			p.Growth = growthRequests(c, oldQ)
		}
		if len(p.Growth) > 0 {
			g := p.growthClaim()
			t.eng.AddClaim(g)
			ids = append(ids, g.UID)
		}
		planned = append(planned, p)
		res.Changes = append(res.Changes, cr)
	}
	decisions, ok := t.eng.DecideTogether(ids)
	for i := range res.Changes {
		for _, p := range planned {
			if p.Policy == res.Changes[i].Policy && len(p.Growth) > 0 {
				d := decisions[p.growthID()]
				res.Changes[i].Decision = &d
			}
		}
	}
	if !ok || dryRun {
		t.undoLocked(ids)
		res.Granted = ok
		return res, nil
	}
	for _, p := range planned {
		t.addPendingLocked(p)
	}
	*entries = planned
	return res, nil
}

func (t *term) undoLocked(ids []string) {
	for _, id := range ids {
		t.eng.RemoveClaim(id)
	}
}

// growthRequests are the requests of c above what old hold, in c's form.
func growthRequests(c *quotav1alpha1.ResourceClaim, old []quota.Claim) []quotav1alpha1.ResourceRequest {
	qc := convert.Claim(c)
	grown := quota.Growth(old, qc)
	var out []quotav1alpha1.ResourceRequest
	for _, g := range grown {
		for i, r := range qc.Requests {
			if r.ResourceType == g.ResourceType && r.Dims.Key() == g.Dims.Key() {
				req := c.Spec.Requests[i]
				req.Amount = g.Amount
				out = append(out, req)
				break
			}
		}
	}
	return out
}

// replacementName is the name of the claim that replaces olds: the rendered
// name when it is free, otherwise one derived from the object, the policy
// and the claims it replaces (so each resize gets a new name). "" when even
// that is taken.
func (t *term) replacementName(c *quotav1alpha1.ResourceClaim, obj ObjectRef, policy string, olds []heldClaim) string {
	taken := func(name string) bool {
		k := key(c.Namespace, name)
		return t.pending[k] != nil || t.claimStored(k) || slices.ContainsFunc(olds, func(o heldClaim) bool { return o.ref.key() == k })
	}
	if !taken(c.Name) {
		return c.Name
	}
	h := sha256.New()
	h.Write([]byte(obj.UID + "/" + policy))
	for _, o := range olds {
		h.Write([]byte("/" + o.ref.UID))
	}
	suffix := "-" + hex.EncodeToString(h.Sum(nil)[:5])
	base := c.Name
	if len(base) > 200 {
		base = base[:200]
	}
	if name := base + suffix; !taken(name) {
		return name
	}
	return ""
}

// replacedClaim is a stored claim an update replaces.
type replacedClaim struct {
	Namespace string `json:"ns"`
	Name      string `json:"n"`
	UID       string `json:"u"`
}

func (r replacedClaim) key() string { return key(r.Namespace, r.Name) }

// heldClaim is a claim of an object the engine counts.
type heldClaim struct {
	ref   replacedClaim
	claim quota.Claim
}

// claimsOfObjectLocked are the granted claims policy made for an object.
func (t *term) claimsOfObjectLocked(objectUID, policy string) []heldClaim {
	var out []heldClaim
	for uid, pol := range t.objectClaims[objectUID] {
		if pol != policy {
			continue
		}
		d, ok := t.eng.Decision(uid)
		if !ok || d.Outcome != quota.Granted {
			continue
		}
		c, _ := t.eng.Claim(uid)
		out = append(out, heldClaim{ref: replacedClaim{Namespace: c.Namespace, Name: c.Name, UID: uid}, claim: c})
	}
	slices.SortFunc(out, func(a, b heldClaim) int { return strings.Compare(a.ref.key(), b.ref.key()) })
	return out
}

// pendingOfObject returns the pending entries of an object made in this
// request (rec), and whether another request has one.
func (t *term) pendingOfObject(objectUID string, rec *CreateRecord) (mine []*pendingClaim, others bool) {
	for k := range t.pendingByObject[objectUID] {
		p := t.pending[k]
		if p == nil {
			continue
		}
		if rec != nil && p.Update && p.outcome == outcomeUnknown && rec.has(p) {
			mine = append(mine, p)
		} else {
			others = true
		}
	}
	return mine, others
}

// objectOfClaim indexes claims made by policies by their object, so that an
// update finds what its object holds. t.mu is held.
func (t *term) indexClaimLocked(c *quotav1alpha1.ResourceClaim) {
	obj, pol := c.Annotations[AnnotationResourceUID], c.Annotations[AnnotationPolicy]
	if obj == "" || pol == "" {
		return
	}
	t.indexLocked(obj, string(c.UID), pol)
}

func (t *term) indexLocked(objectUID, claimUID, policy string) {
	m := t.objectClaims[objectUID]
	if m == nil {
		m = map[string]string{}
		t.objectClaims[objectUID] = m
	}
	m[claimUID] = policy
	t.claimObject[claimUID] = objectUID
}

func (t *term) unindexClaimLocked(claimUID string) {
	obj, ok := t.claimObject[claimUID]
	if !ok {
		return
	}
	delete(t.claimObject, claimUID)
	if m := t.objectClaims[obj]; m != nil {
		delete(m, claimUID)
		if len(m) == 0 {
			delete(t.objectClaims, obj)
		}
	}
}

// addPendingLocked holds a pending entry: a create's whole claim, or an
// update's growth.
func (t *term) addPendingLocked(p *pendingClaim) {
	k := p.key()
	t.pending[k] = p
	m := t.pendingByObject[p.ObjectUID]
	if m == nil {
		m = map[string]struct{}{}
		t.pendingByObject[p.ObjectUID] = m
	}
	m[k] = struct{}{}
	for _, r := range p.Replaces {
		t.replacing[r.UID] = false
	}
}

// dropPendingLocked forgets a pending entry (not what it holds).
func (t *term) dropPendingLocked(p *pendingClaim) {
	k := p.key()
	if t.pending[k] == p {
		delete(t.pending, k)
	}
	if m := t.pendingByObject[p.ObjectUID]; m != nil {
		delete(m, k)
		if len(m) == 0 {
			delete(t.pendingByObject, p.ObjectUID)
		}
	}
	for _, r := range p.Replaces {
		delete(t.replacing, r.UID)
	}
}

// forgetPendingLocked releases what a pending entry holds and forgets it: its
// object's change was refused. The claims an update would have replaced stay,
// unless they were deleted meanwhile.
func (t *term) forgetPendingLocked(p *pendingClaim) {
	if p.Update {
		t.eng.RemoveClaim(p.growthID())
		for _, r := range p.Replaces {
			if t.replacing[r.UID] { // deleted while it was being replaced
				t.eng.RemoveClaim(r.UID)
				delete(t.claimKeys, r.UID)
				t.unindexClaimLocked(r.UID)
			}
		}
	} else {
		t.eng.RemoveClaim(provisionalID(p.key()))
	}
	t.dropPendingLocked(p)
}

// growthID is the provisional ID of what an update holds beyond the claims
// it replaces.
func (p *pendingClaim) growthID() string { return "update:" + p.key() }

// growthClaim is the growth of an update as a claim of the new consumer.
func (p *pendingClaim) growthClaim() quota.Claim {
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, CreationTimestamp: p.Created},
		Spec: p.Spec}
	c.Spec.Requests = p.Growth
	qc := convert.Claim(c)
	qc.UID = p.growthID()
	return qc
}

// swapLocked counts the claim that replaced an update's old claims: the
// growth and the old claims go, the new claim (nil for a release) is
// restored as granted, in one step under the lock. t.mu is held.
func (t *term) swapLocked(p *pendingClaim, c *quotav1alpha1.ResourceClaim) {
	t.eng.RemoveClaim(p.growthID())
	for _, r := range p.Replaces {
		t.eng.RemoveClaim(r.UID)
		delete(t.claimKeys, r.UID)
		t.unindexClaimLocked(r.UID)
	}
	if c != nil {
		uid := string(c.UID)
		t.eng.RestoreGranted(convert.Claim(c))
		t.claimKeys[uid] = key(c.Namespace, c.Name)
		t.indexClaimLocked(c)
	}
	t.dropPendingLocked(p)
}

// adoptUpdateLocked counts a claim written for an update, seen by the cache
// (possibly before the writer learned its transaction committed).
func (t *term) adoptUpdateLocked(p *pendingClaim, c *quotav1alpha1.ResourceClaim) bool {
	if string(c.UID) != p.ClaimUID || !convert.IsGranted(c) {
		return false
	}
	t.swapLocked(p, c)
	return true
}

// String names an update's change for logs.
func (p *pendingClaim) describe() string {
	if p.Release {
		return fmt.Sprintf("release of %v", p.Replaces)
	}
	return fmt.Sprintf("claim %s replacing %v", p.key(), p.Replaces)
}
