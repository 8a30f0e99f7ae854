package quota

import "fmt"

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
		if a.Requests[i] != b.Requests[i] {
			return false
		}
	}
	return true
}
