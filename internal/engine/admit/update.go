package admit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/planes"
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

// lockObject takes the cache's lock once no other change of the object is
// pending or being decided, so each is decided against what the object
// really holds. It returns this request's own earlier entries.
func (t *Term) lockObject(ctx context.Context, objectUID string) ([]*formats.PendingClaim, error) {
	rec := route.RecordOf(ctx)
	for {
		if err := t.lockCurrent(ctx); err != nil {
			return nil, err
		}
		mine, others := t.Cache.PendingOfObjectLocked(objectUID, rec.Has)
		if !others && !t.Cache.UpdatingLocked(objectUID) {
			return mine, nil
		}
		t.Cache.Unlock()
		select {
		case <-ctx.Done():
			return nil, route.ErrObjectBusy
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (t *Term) AdmitUpdate(ctx context.Context, obj route.ObjectRef, changes []route.PolicyChange, dryRun bool) (route.UpdateResult, error) {
	mine, err := t.lockObject(ctx, obj.UID)
	if err != nil {
		return route.UpdateResult{}, err
	}
	if dryRun {
		defer t.Cache.Unlock()
		res, _, _ := t.decideChangesLocked(obj, changes, true)
		return res, nil
	}
	token := t.Cache.BeginUpdateLocked(obj.UID)
	defer t.Cache.EndUpdate(obj.UID, token)
	if len(mine) > 0 {
		// This request's earlier attempt: undone before deciding again.
		enginemetrics.UpdateReadmissions.Inc()
		var keys []string
		for _, p := range mine {
			t.Cache.ForgetPendingLocked(p)
			keys = append(keys, p.Key())
		}
		t.Cache.Unlock()
		if res := t.Committer.Write(ctx, &fence.Ops{Releases: keys}); res.Err != nil {
			return route.UpdateResult{}, res.Err
		}
		t.Cache.Notify()
		t.Cache.Lock()
	}
	res, entries, err := t.decideChangesLocked(obj, changes, false)
	t.Cache.Unlock()
	if err != nil || !res.Granted || len(entries) == 0 {
		return res, err
	}
	if err := t.record(ctx, entries, "a ResourceClaim stored or admitted meanwhile"); err != nil {
		return route.UpdateResult{}, err
	}
	return res, nil
}

// decideChangesLocked decides the growth of every change together and, unless
// dryRun, holds it and records each change as a pending entry. The cache's
// lock is held.
func (t *Term) decideChangesLocked(obj route.ObjectRef, changes []route.PolicyChange, dryRun bool) (route.UpdateResult, []*formats.PendingClaim, error) {
	acc := t.Cache.AccountsLocked()
	res := route.UpdateResult{Granted: true}
	now := metav1.Now()
	var ids []string
	var planned []*formats.PendingClaim
	undo := func() {
		for _, id := range ids {
			acc.RemoveClaim(id)
		}
	}
	for _, ch := range changes {
		olds := t.Cache.ClaimsOfObjectLocked(obj.UID, ch.Policy)
		var oldQ []quota.Claim
		for _, o := range olds {
			oldQ = append(oldQ, o.Claim)
		}
		cr := route.ChangeResult{Policy: ch.Policy, Old: quota.Holding(oldQ...), New: map[quota.Cell]int64{}}
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
		check := ch.Check
		p := &formats.PendingClaim{Policy: ch.Policy, Resource: obj.Resource, ObjectUID: obj.UID, Created: now, Update: true, Check: &check,
			ClaimUID: string(uuid.NewUUID())}
		for _, o := range olds {
			p.Replaces = append(p.Replaces, o.Ref)
		}
		if ch.Claim == nil {
			p.Namespace, p.Name, p.Release = olds[0].Ref.Namespace, olds[0].Ref.Name, true
			p.Spec.ResourceRef = &quotav1alpha1.ResourceRef{APIGroup: obj.APIGroup, Kind: obj.Kind, Namespace: obj.Namespace, Name: obj.Name}
			if obj.Plane != "" {
				p.Extra = map[string]string{planes.Annotation: obj.Plane}
			}
		} else {
			c := ch.Claim
			p.Namespace, p.Name, p.Spec = c.Namespace, t.replacementNameLocked(c, obj, ch.Policy, olds), c.Spec
			if p.Name == "" {
				undo()
				return route.UpdateResult{}, nil, &route.NameTakenError{Claim: formats.Key(c.Namespace, c.Name), Policy: ch.Policy, By: "other claims (and the name derived from the object)"}
			}
			if len(c.Labels) > 0 {
				p.Labels = c.Labels
			}
			p.Extra = formats.ExtraAnnotations(c.Annotations)
			p.Growth = growthRequests(c, oldQ)
		}
		if len(p.Growth) > 0 {
			g := p.GrowthClaim()
			acc.AddClaim(g)
			ids = append(ids, g.UID)
		}
		planned = append(planned, p)
		res.Changes = append(res.Changes, cr)
	}
	decisions, ok := acc.DecideTogether(ids)
	for i := range res.Changes {
		for _, p := range planned {
			if p.Policy == res.Changes[i].Policy && len(p.Growth) > 0 {
				d := decisions[p.GrowthID()]
				res.Changes[i].Decision = &d
			}
		}
	}
	if !ok || dryRun {
		undo()
		res.Granted = ok
		return res, nil, nil
	}
	for _, p := range planned {
		t.Cache.AddPendingLocked(p)
	}
	return res, planned, nil
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

// replacementNameLocked is the name of the claim that replaces olds: the
// rendered name when it is free, otherwise one derived from the object, the
// policy and the claims it replaces (so each resize gets a new name). "" when
// even that is taken.
func (t *Term) replacementNameLocked(c *quotav1alpha1.ResourceClaim, obj route.ObjectRef, policy string, olds []cache.HeldClaim) string {
	taken := func(name string) bool {
		k := formats.Key(c.Namespace, name)
		return t.Cache.PendingLocked(k) != nil || t.Cache.ClaimStoredLocked(k) || slices.ContainsFunc(olds, func(o cache.HeldClaim) bool { return o.Ref.Key() == k })
	}
	if !taken(c.Name) {
		return c.Name
	}
	h := sha256.New()
	h.Write([]byte(obj.UID + "/" + policy))
	for _, o := range olds {
		h.Write([]byte("/" + o.Ref.UID))
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
