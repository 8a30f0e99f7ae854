package quota

import (
	"fmt"
	"slices"
	"strings"
)

func pendingDecision(c Claim) Decision {
	d := Decision{Outcome: Pending, Message: "waiting for a decision", Requests: make([]RequestResult, len(c.Requests))}
	for i, r := range c.Requests {
		d.Requests[i] = RequestResult{ResourceType: r.ResourceType, Status: "Pending", Reason: ReasonPending,
			Bucket: BucketID{c.Consumer, r.ResourceType, ""}}
	}
	return d
}

func grantedDecision(c Claim) Decision {
	d := Decision{Outcome: Granted, Requests: make([]RequestResult, len(c.Requests))}
	for i, r := range c.Requests {
		d.Requests[i] = RequestResult{ResourceType: r.ResourceType, Status: "Granted", Reason: ReasonQuotaAvailable,
			Allocated: r.Amount, Bucket: BucketID{c.Consumer, r.ResourceType, ""}}
	}
	return d
}

func validationFailed(c Claim, msg string) Decision {
	d := Decision{Outcome: ValidationFailed, Message: msg + "; nothing is allocated", Requests: make([]RequestResult, len(c.Requests))}
	for i, r := range c.Requests {
		d.Requests[i] = RequestResult{ResourceType: r.ResourceType, Status: "Denied", Reason: ReasonValidationFailed,
			Message: msg, Bucket: BucketID{c.Consumer, r.ResourceType, ""}}
	}
	return d
}

// exceededMessage says what was requested, what is available, the limit,
// and for which consumer to raise it.
func exceededMessage(c Claim, r Request, baseUnit string, id BucketID, b *bucket) string {
	where := ""
	if id.Dims != "" {
		where = " with " + id.Dims
	}
	return fmt.Sprintf("requested %d %s of %s%s for %s, but only %d of the limit %d is available (%d allocated, bucket %s); raise the limit with a ResourceGrant for %s, or release claims",
		r.Amount, unit(baseUnit), r.ResourceType, where, c.Consumer, b.available(), b.limit(), b.allocated(), BucketName(id), c.Consumer)
}

// levelsMessage names every level a request was checked against, which one
// refused it, and whom to ask: "requested 4 core of vcpu for Project web:
// Project web has 12 of 20 available; Organization acme has 2 of 100
// available (this limit refused); group team-data has 30 of 40 available;
// ...". A group is shown by its limit and room only: never its members.
func levelsMessage(c Claim, r Request, baseUnit string, levels []LevelStatus) string {
	where := ""
	if k := r.Dims.Key(); k != "" {
		where = " with " + k
	}
	parts := make([]string, 0, len(levels))
	var refused LevelStatus
	for _, l := range levels {
		b := l.Bucket
		dims := ""
		if b.ID.Dims != "" {
			dims = " (" + b.ID.Dims + ")"
		}
		switch {
		case !l.Limited:
			parts = append(parts, fmt.Sprintf("%s has no grant (no limit at this level)", l.Consumer.LevelName()))
		case l.Refused:
			refused = l
			parts = append(parts, fmt.Sprintf("%s has %d of %d available%s (this limit refused; bucket %s)", l.Consumer.LevelName(), b.Available(), b.Limit, dims, BucketName(b.ID)))
		default:
			parts = append(parts, fmt.Sprintf("%s has %d of %d available%s", l.Consumer.LevelName(), b.Available(), b.Limit, dims))
		}
	}
	raise := fmt.Sprintf("raise the limit with a ResourceGrant for %s, or release claims", refused.Consumer)
	if refused.Consumer.IsGroup() {
		raise = fmt.Sprintf("the platform administrators can raise it (ResourceGrant %s/%s), or release claims", refused.Consumer.Namespace, refused.Consumer.Name)
	}
	return fmt.Sprintf("requested %d %s of %s%s for %s: %s; %s",
		r.Amount, unit(baseUnit), r.ResourceType, where, c.Consumer.LevelName(), strings.Join(parts, "; "), raise)
}

// GrantedMessage describes a granted claim.
func GrantedMessage(c Claim, d Decision) string {
	return fmt.Sprintf("all %d requests are allocated to %s", len(d.Requests), c.Consumer)
}

// GrantedRequestMessage describes a granted request.
func GrantedRequestMessage(r RequestResult) string {
	return fmt.Sprintf("allocated %d of %s in bucket %s", r.Allocated, r.ResourceType, BucketName(r.Bucket))
}

func unit(baseUnit string) string {
	if baseUnit == "" {
		return "units"
	}
	return baseUnit
}

func sameDecision(a, b Decision) bool {
	if a.Outcome != b.Outcome || a.Message != b.Message || len(a.Requests) != len(b.Requests) {
		return false
	}
	for i := range a.Requests {
		x, y := a.Requests[i], b.Requests[i]
		if x.ResourceType != y.ResourceType || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.Allocated != y.Allocated || x.Bucket != y.Bucket || !slices.EqualFunc(x.Levels, y.Levels, sameLevel) {
			return false
		}
	}
	return true
}

func sameLevel(a, b LevelStatus) bool {
	return a.Consumer == b.Consumer && a.Limited == b.Limited && a.Refused == b.Refused &&
		a.Bucket.ID == b.Bucket.ID && a.Bucket.Limit == b.Bucket.Limit && a.Bucket.Allocated == b.Bucket.Allocated
}
