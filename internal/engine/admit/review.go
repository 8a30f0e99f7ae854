package admit

import (
	"context"
	"fmt"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// A review (QuotaReview) asks what applying a set of objects in order
// would do: each object's claims decided after the ones before it, the
// claims of the objects that fit held for the rest of the review, the room an
// update that shrinks gives back there for the next, and then everything
// forgotten. It is decided on the leader's cache under one hold of its lock,
// with the same decision admission makes (Accounts.DecideTogether); nothing
// is recorded, written or kept (accounting.WhatIf).

func (t *Term) Review(ctx context.Context, steps []route.ReviewStep) (route.ReviewResult, error) {
	if err := t.lockCurrent(ctx); err != nil {
		return route.ReviewResult{}, err
	}
	defer t.Cache.Unlock()
	r := reviewer{t: t, w: t.Cache.AccountsLocked().WhatIf(), names: map[string]bool{}, now: time.Now()}
	defer r.w.Undo()
	out := route.ReviewResult{Steps: make([]route.ReviewStepResult, len(steps))}
	for i, s := range steps {
		if s.Update != nil {
			out.Steps[i] = r.update(i, *s.Update, s.Changes)
		} else {
			out.Steps[i] = r.create(i, s.Claims)
		}
	}
	out.Buckets = r.w.Buckets()
	return out, nil
}

// reviewer is one review being decided; the cache's lock is held.
type reviewer struct {
	t   *Term
	w   *accounting.WhatIf
	now time.Time
	// names are the claims the review's earlier steps made, by key.
	names map[string]bool
}

// id is a claim's ID in the simulation, unlike any real claim's.
func (r *reviewer) id(step int, key string) string { return fmt.Sprintf("review:%d:%s", step, key) }

// taken says what holds a claim name, "" when it is free.
func (r *reviewer) taken(key string) string {
	switch {
	case r.names[key]:
		return "a claim an earlier object of the review makes"
	case r.t.Cache.PendingLocked(key) != nil:
		return "a claim being admitted for another create"
	case r.t.Cache.ClaimStoredLocked(key):
		return "a stored ResourceClaim"
	}
	return ""
}

func (r *reviewer) create(step int, claims []*quotav1alpha1.ResourceClaim) route.ReviewStepResult {
	res := route.ReviewStepResult{}
	seen := map[string]string{}
	qcs := make([]quota.Claim, 0, len(claims))
	for _, c := range claims {
		k := formats.Key(c.Namespace, c.Name)
		policy := c.Annotations[quotav1alpha1.AnnotationPolicy]
		by := r.taken(k)
		if seen[k] != "" {
			by = "the claim ClaimCreationPolicy " + seen[k] + " renders for the same object"
		}
		if by != "" {
			res.NameTaken = &route.NameTakenError{Claim: k, Policy: policy, By: by}
			return res
		}
		seen[k] = policy
		qc := convert.Claim(c)
		qc.UID, qc.Created = r.id(step, k), r.now.Add(time.Duration(step)*time.Microsecond)
		qcs = append(qcs, qc)
		for cell, n := range quota.Holding(qc) {
			res.Charges = append(res.Charges, route.ReviewCharge{Policy: policy, Cell: cell, New: n})
		}
	}
	decisions, ok := r.w.Decide(qcs)
	res.Granted = ok
	for i, qc := range qcs {
		res.Decisions = append(res.Decisions, decisions[qc.UID])
		res.Policies = append(res.Policies, claims[i].Annotations[quotav1alpha1.AnnotationPolicy])
	}
	if ok {
		for k := range seen {
			r.names[k] = true
		}
	}
	return res
}

func (r *reviewer) update(step int, obj route.ObjectRef, changes []route.PolicyChange) route.ReviewStepResult {
	res := route.ReviewStepResult{Granted: true}
	type planned struct {
		olds   []string
		new    *quota.Claim
		growth *quota.Claim
	}
	var plans []planned
	var growth []quota.Claim
	var growthOf []string
	for _, ch := range changes {
		olds := r.t.Cache.ClaimsOfObjectLocked(obj.UID, ch.Policy)
		var oldQ []quota.Claim
		p := planned{}
		for _, o := range olds {
			oldQ = append(oldQ, o.Claim)
			p.olds = append(p.olds, o.Claim.UID)
		}
		held := quota.Holding(oldQ...)
		now := map[quota.Cell]int64{}
		if ch.Claim != nil {
			qc := convert.Claim(ch.Claim)
			qc.UID, qc.Created = r.id(step, ch.Policy), r.now.Add(time.Duration(step)*time.Microsecond)
			now = quota.Holding(qc)
			p.new = &qc
			if g := quota.Growth(oldQ, qc); len(g) > 0 {
				gc := qc
				gc.UID, gc.Requests = r.id(step, "growth/"+ch.Policy), g
				p.growth = &gc
				growth = append(growth, gc)
				growthOf = append(growthOf, ch.Policy)
			}
		}
		for cell, n := range now {
			res.Charges = append(res.Charges, route.ReviewCharge{Policy: ch.Policy, Cell: cell, New: n, Held: held[cell]})
		}
		for cell, n := range held {
			if _, ok := now[cell]; !ok {
				res.Charges = append(res.Charges, route.ReviewCharge{Policy: ch.Policy, Cell: cell, Held: n})
			}
		}
		plans = append(plans, p)
	}
	if len(growth) > 0 {
		decisions, ok := r.w.Decide(growth)
		for _, g := range growth {
			res.Decisions = append(res.Decisions, decisions[g.UID])
		}
		res.Policies = growthOf
		if !ok {
			res.Granted = false
			return res
		}
	}
	// Stored: each change's claims replaced by its new one.
	for _, p := range plans {
		for _, uid := range p.olds {
			r.w.Release(uid)
		}
		if p.growth != nil {
			r.w.Forget(p.growth.UID)
		}
		if p.new != nil {
			r.w.Hold(*p.new)
		}
	}
	return res
}
