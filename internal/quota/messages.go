package quota

import (
	"fmt"
	"strings"
)

// PendingDecision is the decision of a claim not decided yet.
func PendingDecision(c Claim) Decision {
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

// ValidationFailedDecision is the decision of a claim that does not match
// the registrations: msg says why, and nothing is allocated.
func ValidationFailedDecision(c Claim, msg string) Decision {
	d := Decision{Outcome: ValidationFailed, Message: msg + "; nothing is allocated", Requests: make([]RequestResult, len(c.Requests))}
	for i, r := range c.Requests {
		d.Requests[i] = RequestResult{ResourceType: r.ResourceType, Status: "Denied", Reason: ReasonValidationFailed,
			Message: msg, Bucket: BucketID{c.Consumer, r.ResourceType, ""}}
	}
	return d
}

// ExceededMessage says what was requested, what is available, the limit,
// and for which consumer to raise it.
func ExceededMessage(c Claim, r Request, reg Registration, id BucketID, limit, allocated int64) string {
	where := ""
	if id.Dims != "" {
		where = " with " + id.Dims
	}
	return fmt.Sprintf("requested %s of %s%s for %s, but only %d of the limit %d is available (%d allocated, bucket %s); raise the limit with a ResourceGrant for %s, or release claims",
		reg.Amount(r.Amount), r.ResourceType, where, c.Consumer, Room(limit, allocated), limit, allocated, BucketName(id), c.Consumer)
}

// NoGrantMessage is the refusal of a request no level of whose consumer
// has a grant of its resource type: its limit is 0, and no bucket of it is
// stored to look at. Said plainly: "requested 1 configmap of
// core/configmaps for Namespace dev, but Namespace dev has no grant for
// core/configmaps, so its limit is 0; ...".
func NoGrantMessage(c Claim, r Request, reg Registration, levels []ConsumerID) string {
	where := ""
	if k := r.Dims.Key(); k != "" {
		where = " with " + k
	}
	none := fmt.Sprintf("%s has no grant for %s%s", c.Consumer.LevelName(), r.ResourceType, where)
	if len(levels) > 1 {
		var names []string
		for _, l := range levels {
			names = append(names, l.LevelName())
		}
		none = fmt.Sprintf("no level of it (%s) has a grant for %s%s", strings.Join(names, ", "), r.ResourceType, where)
	}
	return fmt.Sprintf("requested %s of %s%s for %s, but %s, so its limit is 0; a platform administrator grants it with a ResourceGrant for %s (kubectl get resourcegrants -A lists the grants there are)",
		reg.Amount(r.Amount), r.ResourceType, where, c.Consumer.LevelName(), none, c.Consumer)
}

// NotKnownMessage is the refusal of a request of a consumer the engine does
// not know while its registration limits it at levels above (its
// organization): "requested 2 core of vcpu for Project web, but Project web
// is not known ...".
func NotKnownMessage(c Claim, r Request, reg Registration) string {
	above := make([]string, 0, len(reg.Levels))
	for _, l := range reg.Levels {
		if l != c.Consumer.GroupKind() {
			above = append(above, l.Kind)
		}
	}
	return fmt.Sprintf("requested %s of %s for %s, but %s is not known to quota: it does not exist, or was created a moment ago; ResourceRegistration %s also limits it at its %s, which cannot be found without it, so nothing was allocated; create %s first (before what is charged to it) and retry",
		reg.Amount(r.Amount), r.ResourceType, c.Consumer.LevelName(), c.Consumer.LevelName(), reg.Name, strings.Join(above, " and "), c.Consumer.LevelName())
}

// LevelsMessage names every level a request was checked against, which one
// refused it, and whom to ask: "requested 4 core of vcpu for Project web:
// Project web has 12 of 20 available; Organization acme has 2 of 100
// available (this limit refused); group team-data has 30 of 40 available;
// ...". A group is shown by its limit and room only: never its members.
func LevelsMessage(c Claim, r Request, reg Registration, levels []LevelStatus) string {
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
	return fmt.Sprintf("requested %s of %s%s for %s: %s; %s",
		reg.Amount(r.Amount), r.ResourceType, where, c.Consumer.LevelName(), strings.Join(parts, "; "), raise)
}

// RefusalPrefix starts every quota refusal's message: the reference
// implementation's words, which its clients match on; quotaplane's detail
// (what was asked, what is left, what to do) follows.
const RefusalPrefix = "Insufficient quota resources available"

// The messages of the conditions that say all is well are the reference
// implementation's, word for word, for the clients that match on them;
// quotaplane's detail is in the allocations' messages, the buckets and
// Events.
const (
	// GrantActiveMessage is the message of a grant's Active=True.
	GrantActiveMessage = "ResourceGrant is active"
	// RegistrationActiveMessage is the message of a registration's Active=True.
	RegistrationActiveMessage = "The registration is active and resource grants and claims can now be created for this resource type."
	// PolicyReadyMessage is the message of a policy's Ready=True.
	PolicyReadyMessage = "Policy is ready and active"
)

// GrantedMessage is the message of a granted claim's Granted=True.
func GrantedMessage(d Decision) string {
	return fmt.Sprintf("All %d resource requests have been granted", len(d.Requests))
}

// GrantedRequestMessage describes a granted request.
func GrantedRequestMessage(r RequestResult) string {
	return fmt.Sprintf("allocated %d of %s in bucket %s", r.Allocated, r.ResourceType, BucketName(r.Bucket))
}

// Amount is how messages write n base units of the registration's
// resource type: "1 project", "3 projects", "16384 MiB (16 GiB)" — in the
// display unit too when it differs and n converts exactly.
func (r Registration) Amount(n int64) string {
	out := Counted(n, r.BaseUnit)
	if r.DisplayUnit != "" && r.DisplayUnit != r.BaseUnit && r.UnitConversionFactor > 1 && n%r.UnitConversionFactor == 0 {
		out += " (" + Counted(n/r.UnitConversionFactor, r.DisplayUnit) + ")"
	}
	return out
}

// Counted writes n of a unit, the unit in the plural when n is not 1 and it
// is a lowercase word ("project" → "projects"); symbols such as MiB or GiB
// are never changed. An empty unit is "unit".
func Counted(n int64, unit string) string {
	if unit == "" {
		unit = "unit"
	}
	if n != 1 && isWord(unit) {
		switch {
		case strings.HasSuffix(unit, "s") || strings.HasSuffix(unit, "x") || strings.HasSuffix(unit, "ch") || strings.HasSuffix(unit, "sh"):
			unit += "es"
		case len(unit) > 1 && strings.HasSuffix(unit, "y") && !strings.ContainsRune("aeiou", rune(unit[len(unit)-2])):
			unit = unit[:len(unit)-1] + "ies"
		default:
			unit += "s"
		}
	}
	return fmt.Sprintf("%d %s", n, unit)
}

// isWord: a lowercase word of letters, at least three long.
func isWord(s string) bool {
	if len(s) < 3 {
		return false
	}
	for _, c := range s {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// NotClaimingMessage refuses a claim for an object of a kind the
// registration does not list in its claimingResources (allowed).
func NotClaimingMessage(kind, resourceType, registration string, allowed []string) string {
	if len(allowed) == 0 {
		return fmt.Sprintf("%s objects may not claim %s: ResourceRegistration %s lists no claimingResources; add %s to its spec.claimingResources",
			kind, resourceType, registration, kind)
	}
	return fmt.Sprintf("%s objects may not claim %s; ResourceRegistration %s allows only %s", kind, resourceType, registration, strings.Join(allowed, ", "))
}
