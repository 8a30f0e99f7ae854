package refusal

import (
	"fmt"
	"strings"

	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// Link returns where to ask for a higher limit of a consumer's resource
// type: the portal's request form, or "" when there is none.
type Link func(consumer quota.ConsumerID, resourceType string) string

// Create is the refusal of a create: the resource type, requested,
// available, limit and consumer of the request that is short.
func Create(kind, name string, res route.AdmitResult, link Link) string {
	return withLink(createMessage(kind, name, res), link, res.Decisions)
}

func createMessage(kind, name string, res route.AdmitResult) string {
	// The request that is short, not a claim undone because another was.
	for _, d := range res.Decisions {
		for _, r := range d.Requests {
			if r.Reason == quota.ReasonQuotaExceeded {
				return fmt.Sprintf("%s: %s", quota.RefusalPrefix, d.Message)
			}
		}
	}
	for _, d := range res.Decisions {
		if d.Outcome != quota.Granted && d.Outcome != quota.Pending {
			return fmt.Sprintf("%s: %s", quota.RefusalPrefix, d.Message)
		}
	}
	return fmt.Sprintf("%s to create %s %s", quota.RefusalPrefix, kind, name)
}

// Update is the refusal of an update: for the request that does not fit,
// the amount before and after, and what is available of which limit.
func Update(kind, name string, res route.UpdateResult, link Link) string {
	var decisions []quota.Decision
	for _, c := range res.Changes {
		if c.Decision != nil {
			decisions = append(decisions, *c.Decision)
		}
	}
	return withLink(updateMessage(kind, name, res), link, decisions)
}

func updateMessage(kind, name string, res route.UpdateResult) string {
	for _, c := range res.Changes {
		if c.Decision == nil {
			continue
		}
		for _, r := range c.Decision.Requests {
			if r.Reason != quota.ReasonQuotaExceeded {
				continue
			}
			cell := quota.Cell{Consumer: r.Bucket.Consumer, ResourceType: r.ResourceType}
			before, after := amountOf(c.Old, cell), amountOf(c.New, cell)
			return fmt.Sprintf("%s: to update %s %s, ClaimCreationPolicy %s would change %s of %s from %d to %d (%d more): %s; the update was not stored",
				quota.RefusalPrefix, kind, name, c.Policy, r.ResourceType, consumerText(r.Bucket.Consumer), before, after, after-before, r.Message)
		}
	}
	return fmt.Sprintf("%s to update %s %s", quota.RefusalPrefix, kind, name)
}

// Review is the refusal admission would give the object of a QuotaReview's
// step, given the engine's answer to it: the same words as Create or Update.
func Review(kind, name string, step route.ReviewStep, res route.ReviewStepResult, link Link) string {
	if step.Update == nil {
		return Create(kind, name, route.AdmitResult{Decisions: res.Decisions}, link)
	}
	ur := route.UpdateResult{}
	for _, ch := range step.Changes {
		cr := route.ChangeResult{Policy: ch.Policy, Old: map[quota.Cell]int64{}, New: map[quota.Cell]int64{}}
		for _, c := range res.Charges {
			if c.Policy != ch.Policy {
				continue
			}
			if c.Held != 0 {
				cr.Old[c.Cell] = c.Held
			}
			if c.New != 0 {
				cr.New[c.Cell] = c.New
			}
		}
		for i, pol := range res.Policies {
			if pol == ch.Policy && i < len(res.Decisions) {
				d := res.Decisions[i]
				cr.Decision = &d
			}
		}
		ur.Changes = append(ur.Changes, cr)
	}
	return Update(kind, name, ur, link)
}

// withLink appends where to ask for more of what ran out, at the level that
// refused it, when link knows a form for it.
func withLink(msg string, link Link, decisions []quota.Decision) string {
	if link == nil {
		return msg
	}
	for _, d := range decisions {
		for _, r := range d.Requests {
			if r.Reason != quota.ReasonQuotaExceeded {
				continue
			}
			consumer := r.Bucket.Consumer
			if r.Refused != nil { // the level that refused it
				consumer = r.Refused.ID.Consumer
			}
			if url := link(consumer, r.ResourceType); url != "" {
				return msg + "; to ask for a higher limit, open " + url
			}
		}
	}
	return msg
}

func amountOf(h map[quota.Cell]int64, c quota.Cell) int64 {
	var n int64
	for k, v := range h {
		if k.Consumer == c.Consumer && k.ResourceType == c.ResourceType {
			n += v
		}
	}
	return n
}

func consumerText(c quota.ConsumerID) string {
	if c.Namespace == "" {
		return c.Kind + " " + c.Name
	}
	return c.Kind + " " + c.Namespace + "/" + c.Name
}

// Holding is what a charge holds, as "2 of example.com/cpus, 1 of
// example.com/instances", or "nothing".
func Holding(h map[quota.Cell]int64) string {
	if len(h) == 0 {
		return "nothing"
	}
	var parts []string
	for _, c := range quota.Cells(h) {
		parts = append(parts, fmt.Sprintf("%d of %s", h[c], c.ResourceType))
	}
	return strings.Join(parts, ", ")
}
