package peer

import (
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/peer/wire"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// The conversions between the engine's types and the peer messages
// (package wire). Every field crosses by name here, so a field added to an
// engine type crosses only once it is added to its message, with a new
// wire.Version if it changes what a message means.

func toObjectRef(o route.ObjectRef) wire.ObjectRef {
	return wire.ObjectRef{APIGroup: o.APIGroup, Kind: o.Kind, Resource: o.Resource, Namespace: o.Namespace, Name: o.Name, UID: o.UID, Plane: o.Plane}
}

func fromObjectRef(o wire.ObjectRef) route.ObjectRef {
	return route.ObjectRef{APIGroup: o.APIGroup, Kind: o.Kind, Resource: o.Resource, Namespace: o.Namespace, Name: o.Name, UID: o.UID, Plane: o.Plane}
}

func toChanges(l []route.PolicyChange) []wire.PolicyChange {
	if l == nil {
		return nil
	}
	out := make([]wire.PolicyChange, len(l))
	for i, c := range l {
		out[i] = wire.PolicyChange{Policy: c.Policy, Claim: c.Claim, Check: wire.UpdateCheck{
			Generation: c.Check.Generation, Trigger: c.Check.Trigger, Target: c.Check.Target, User: c.Check.User, RequestInfo: c.Check.RequestInfo}}
	}
	return out
}

func fromChanges(l []wire.PolicyChange) []route.PolicyChange {
	if l == nil {
		return nil
	}
	out := make([]route.PolicyChange, len(l))
	for i, c := range l {
		out[i] = route.PolicyChange{Policy: c.Policy, Claim: c.Claim, Check: route.UpdateCheck{
			Generation: c.Check.Generation, Trigger: c.Check.Trigger, Target: c.Check.Target, User: c.Check.User, RequestInfo: c.Check.RequestInfo}}
	}
	return out
}

func toSteps(l []route.ReviewStep) []wire.ReviewStep {
	if l == nil {
		return nil
	}
	out := make([]wire.ReviewStep, len(l))
	for i, s := range l {
		out[i] = wire.ReviewStep{Claims: s.Claims, Changes: toChanges(s.Changes)}
		if s.Update != nil {
			o := toObjectRef(*s.Update)
			out[i].Update = &o
		}
	}
	return out
}

func fromSteps(l []wire.ReviewStep) []route.ReviewStep {
	if l == nil {
		return nil
	}
	out := make([]route.ReviewStep, len(l))
	for i, s := range l {
		out[i] = route.ReviewStep{Claims: s.Claims, Changes: fromChanges(s.Changes)}
		if s.Update != nil {
			o := fromObjectRef(*s.Update)
			out[i].Update = &o
		}
	}
	return out
}

func toRefusal(r route.Refusal) wire.Refusal {
	out := wire.Refusal{Consumer: toConsumer(r.Consumer), Policy: r.Policy, Message: r.Message,
		Object: wire.ObjectName{APIGroup: r.Object.APIGroup, Kind: r.Object.Kind, Namespace: r.Object.Namespace, Name: r.Object.Name, UID: r.Object.UID}}
	if r.Requests != nil {
		out.Requests = make([]wire.Amount, len(r.Requests))
		for i, a := range r.Requests {
			out.Requests[i] = wire.Amount{ResourceType: a.ResourceType, Amount: a.Amount}
		}
	}
	return out
}

func fromRefusal(r wire.Refusal) route.Refusal {
	out := route.Refusal{Consumer: fromConsumer(r.Consumer), Policy: r.Policy, Message: r.Message,
		Object: history.ObjectRef{APIGroup: r.Object.APIGroup, Kind: r.Object.Kind, Namespace: r.Object.Namespace, Name: r.Object.Name, UID: r.Object.UID}}
	if r.Requests != nil {
		out.Requests = make([]history.Amount, len(r.Requests))
		for i, a := range r.Requests {
			out.Requests[i] = history.Amount{ResourceType: a.ResourceType, Amount: a.Amount}
		}
	}
	return out
}

func toConsumer(c quota.ConsumerID) wire.ConsumerID {
	return wire.ConsumerID{APIGroup: c.APIGroup, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

func fromConsumer(c wire.ConsumerID) quota.ConsumerID {
	return quota.ConsumerID{APIGroup: c.APIGroup, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}
}

func toCell(c quota.Cell) wire.Cell {
	return wire.Cell{Consumer: toConsumer(c.Consumer), ResourceType: c.ResourceType, Dims: c.Dims}
}

func fromCell(c wire.Cell) quota.Cell {
	return quota.Cell{Consumer: fromConsumer(c.Consumer), ResourceType: c.ResourceType, Dims: c.Dims}
}

func toBucketID(b quota.BucketID) wire.BucketID {
	return wire.BucketID{Consumer: toConsumer(b.Consumer), ResourceType: b.ResourceType, Dims: b.Dims}
}

func fromBucketID(b wire.BucketID) quota.BucketID {
	return quota.BucketID{Consumer: fromConsumer(b.Consumer), ResourceType: b.ResourceType, Dims: b.Dims}
}

func toDims(d quota.Dimensions) []wire.Dim {
	if d == nil {
		return nil
	}
	out := make([]wire.Dim, len(d))
	for i, x := range d {
		out[i] = wire.Dim{Key: x.Key, Value: x.Value}
	}
	return out
}

func fromDims(d []wire.Dim) quota.Dimensions {
	if d == nil {
		return nil
	}
	out := make(quota.Dimensions, len(d))
	for i, x := range d {
		out[i] = quota.Dim{Key: x.Key, Value: x.Value}
	}
	return out
}

func toBucket(b quota.BucketStatus) wire.BucketStatus {
	out := wire.BucketStatus{ID: toBucketID(b.ID), Dims: toDims(b.Dims), Limit: b.Limit, Allocated: b.Allocated, Claims: b.Claims,
		Unlimited: b.Unlimited, Clusters: b.Clusters}
	if b.Grants != nil {
		out.Grants = make([]wire.GrantContribution, len(b.Grants))
		for i, g := range b.Grants {
			out.Grants[i] = wire.GrantContribution{Namespace: g.Namespace, Name: g.Name, Amount: g.Amount, Generation: g.Generation, ExpiresAt: g.ExpiresAt}
		}
	}
	return out
}

func fromBucket(b wire.BucketStatus) quota.BucketStatus {
	out := quota.BucketStatus{ID: fromBucketID(b.ID), Dims: fromDims(b.Dims), Limit: b.Limit, Allocated: b.Allocated, Claims: b.Claims,
		Unlimited: b.Unlimited, Clusters: b.Clusters}
	if b.Grants != nil {
		out.Grants = make([]quota.GrantContribution, len(b.Grants))
		for i, g := range b.Grants {
			out.Grants[i] = quota.GrantContribution{Namespace: g.Namespace, Name: g.Name, Amount: g.Amount, Generation: g.Generation, ExpiresAt: g.ExpiresAt}
		}
	}
	return out
}

func toDecision(d quota.Decision) wire.Decision {
	out := wire.Decision{Outcome: string(d.Outcome), Message: d.Message}
	if d.Requests != nil {
		out.Requests = make([]wire.RequestResult, len(d.Requests))
		for i, r := range d.Requests {
			w := wire.RequestResult{ResourceType: r.ResourceType, Status: r.Status, Reason: r.Reason, Message: r.Message, Allocated: r.Allocated, Bucket: toBucketID(r.Bucket)}
			if r.Refused != nil {
				b := toBucket(*r.Refused)
				w.Refused = &b
			}
			if r.Levels != nil {
				w.Levels = make([]wire.LevelStatus, len(r.Levels))
				for j, l := range r.Levels {
					w.Levels[j] = wire.LevelStatus{Consumer: toConsumer(l.Consumer), Limited: l.Limited, Bucket: toBucket(l.Bucket), Refused: l.Refused}
				}
			}
			out.Requests[i] = w
		}
	}
	return out
}

func fromDecision(d wire.Decision) quota.Decision {
	out := quota.Decision{Outcome: quota.Outcome(d.Outcome), Message: d.Message}
	if d.Requests != nil {
		out.Requests = make([]quota.RequestResult, len(d.Requests))
		for i, r := range d.Requests {
			q := quota.RequestResult{ResourceType: r.ResourceType, Status: r.Status, Reason: r.Reason, Message: r.Message, Allocated: r.Allocated, Bucket: fromBucketID(r.Bucket)}
			if r.Refused != nil {
				b := fromBucket(*r.Refused)
				q.Refused = &b
			}
			if r.Levels != nil {
				q.Levels = make([]quota.LevelStatus, len(r.Levels))
				for j, l := range r.Levels {
					q.Levels[j] = quota.LevelStatus{Consumer: fromConsumer(l.Consumer), Limited: l.Limited, Bucket: fromBucket(l.Bucket), Refused: l.Refused}
				}
			}
			out.Requests[i] = q
		}
	}
	return out
}

func toDecisions(l []quota.Decision) []wire.Decision {
	if l == nil {
		return nil
	}
	out := make([]wire.Decision, len(l))
	for i, d := range l {
		out[i] = toDecision(d)
	}
	return out
}

func fromDecisions(l []wire.Decision) []quota.Decision {
	if l == nil {
		return nil
	}
	out := make([]quota.Decision, len(l))
	for i, d := range l {
		out[i] = fromDecision(d)
	}
	return out
}

func toClaim(c quota.Claim) wire.Claim {
	out := wire.Claim{UID: c.UID, Namespace: c.Namespace, Name: c.Name, Created: c.Created, Consumer: toConsumer(c.Consumer), Cluster: c.Cluster}
	if c.Requests != nil {
		out.Requests = make([]wire.Request, len(c.Requests))
		for i, r := range c.Requests {
			out.Requests[i] = wire.Request{ResourceType: r.ResourceType, Amount: r.Amount, Dims: toDims(r.Dims)}
		}
	}
	if c.ResourceRef != nil {
		out.ResourceRef = &wire.GroupKind{Group: c.ResourceRef.Group, Kind: c.ResourceRef.Kind}
	}
	return out
}

func fromClaim(c wire.Claim) quota.Claim {
	out := quota.Claim{UID: c.UID, Namespace: c.Namespace, Name: c.Name, Created: c.Created, Consumer: fromConsumer(c.Consumer), Cluster: c.Cluster}
	if c.Requests != nil {
		out.Requests = make([]quota.Request, len(c.Requests))
		for i, r := range c.Requests {
			out.Requests[i] = quota.Request{ResourceType: r.ResourceType, Amount: r.Amount, Dims: fromDims(r.Dims)}
		}
	}
	if c.ResourceRef != nil {
		out.ResourceRef = &quota.GroupKind{Group: c.ResourceRef.Group, Kind: c.ResourceRef.Kind}
	}
	return out
}

func toCreateResult(r route.AdmitResult) *wire.CreateResult {
	out := &wire.CreateResult{Granted: r.Granted, Decisions: toDecisions(r.Decisions)}
	if r.Claims != nil {
		out.Claims = make([]wire.Claim, len(r.Claims))
		for i, c := range r.Claims {
			out.Claims[i] = toClaim(c)
		}
	}
	return out
}

func fromCreateResult(r *wire.CreateResult) route.AdmitResult {
	if r == nil {
		return route.AdmitResult{}
	}
	out := route.AdmitResult{Granted: r.Granted, Decisions: fromDecisions(r.Decisions)}
	if r.Claims != nil {
		out.Claims = make([]quota.Claim, len(r.Claims))
		for i, c := range r.Claims {
			out.Claims[i] = fromClaim(c)
		}
	}
	return out
}

func toBudgetResult(r quota.BudgetResult) *wire.BudgetResult {
	return &wire.BudgetResult{OK: r.OK, ResourceType: r.ResourceType, Asked: r.Asked, Left: r.Left, Limit: r.Limit, Given: r.Given, Message: r.Message}
}

func fromBudgetResult(r *wire.BudgetResult) quota.BudgetResult {
	if r == nil {
		return quota.BudgetResult{}
	}
	return quota.BudgetResult{OK: r.OK, ResourceType: r.ResourceType, Asked: r.Asked, Left: r.Left, Limit: r.Limit, Given: r.Given, Message: r.Message}
}

func toReviewResult(r route.ReviewResult) *wire.ReviewResult {
	out := &wire.ReviewResult{}
	if r.Steps != nil {
		out.Steps = make([]wire.ReviewStepResult, len(r.Steps))
		for i, s := range r.Steps {
			w := wire.ReviewStepResult{Granted: s.Granted, Decisions: toDecisions(s.Decisions), Policies: s.Policies}
			if s.Charges != nil {
				w.Charges = make([]wire.ReviewCharge, len(s.Charges))
				for j, c := range s.Charges {
					w.Charges[j] = wire.ReviewCharge{Policy: c.Policy, Cell: toCell(c.Cell), New: c.New, Held: c.Held}
				}
			}
			if s.NameTaken != nil {
				w.NameTaken = &wire.NameTaken{Claim: s.NameTaken.Claim, Policy: s.NameTaken.Policy, By: s.NameTaken.By}
			}
			out.Steps[i] = w
		}
	}
	if r.Buckets != nil {
		out.Buckets = make([]wire.WhatIfBucket, len(r.Buckets))
		for i, b := range r.Buckets {
			out.Buckets[i] = wire.WhatIfBucket{Before: toBucket(b.Before), After: toBucket(b.After)}
		}
	}
	return out
}

func fromReviewResult(r *wire.ReviewResult) route.ReviewResult {
	if r == nil {
		return route.ReviewResult{}
	}
	var out route.ReviewResult
	if r.Steps != nil {
		out.Steps = make([]route.ReviewStepResult, len(r.Steps))
		for i, s := range r.Steps {
			a := route.ReviewStepResult{Granted: s.Granted, Decisions: fromDecisions(s.Decisions), Policies: s.Policies}
			if s.Charges != nil {
				a.Charges = make([]route.ReviewCharge, len(s.Charges))
				for j, c := range s.Charges {
					a.Charges[j] = route.ReviewCharge{Policy: c.Policy, Cell: fromCell(c.Cell), New: c.New, Held: c.Held}
				}
			}
			if s.NameTaken != nil {
				a.NameTaken = &route.NameTakenError{Claim: s.NameTaken.Claim, Policy: s.NameTaken.Policy, By: s.NameTaken.By}
			}
			out.Steps[i] = a
		}
	}
	if r.Buckets != nil {
		out.Buckets = make([]accounting.WhatIfBucket, len(r.Buckets))
		for i, b := range r.Buckets {
			out.Buckets[i] = accounting.WhatIfBucket{Before: fromBucket(b.Before), After: fromBucket(b.After)}
		}
	}
	return out
}
