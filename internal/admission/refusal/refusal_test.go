package refusal

import (
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
)

var (
	project = quota.ConsumerID{Kind: "Project", Name: "web"}
	org     = quota.ConsumerID{Kind: "Organization", Name: "acme"}
)

func short(consumer quota.ConsumerID, refusedAt *quota.ConsumerID) quota.Decision {
	r := quota.RequestResult{ResourceType: "example.com/cpus", Reason: quota.ReasonQuotaExceeded, Message: "asked 3, 1 available of 4"}
	r.Bucket.Consumer = consumer
	if refusedAt != nil {
		r.Refused = &quota.BucketStatus{}
		r.Refused.ID.Consumer = *refusedAt
	}
	return quota.Decision{Outcome: quota.QuotaExceeded, Message: "3 of example.com/cpus for Project web: 1 available", Requests: []quota.RequestResult{r}}
}

// TestTheLinkNamesTheLevelThatRefused: a project's claim refused by its
// organization's cap links to the organization's form, not the project's.
func TestTheLinkNamesTheLevelThatRefused(t *testing.T) {
	var asked quota.ConsumerID
	link := func(c quota.ConsumerID, rt string) string {
		asked = c
		return "https://portal/" + c.Kind + "/" + c.Name + "?type=" + rt
	}
	msg := Create("Instance", "vm-1", route.AdmitResult{Decisions: []quota.Decision{short(project, &org)}}, link)
	if asked != org || !strings.HasSuffix(msg, "; to ask for a higher limit, open https://portal/Organization/acme?type=example.com/cpus") {
		t.Fatalf("link asked for %v, message %q; want the organization's form", asked, msg)
	}
	if !strings.HasPrefix(msg, quota.RefusalPrefix+": 3 of example.com/cpus") {
		t.Fatalf("message %q does not start with the decision's words", msg)
	}
	if got := Create("Instance", "vm-1", route.AdmitResult{Decisions: []quota.Decision{short(project, nil)}}, nil); strings.Contains(got, "open") {
		t.Fatalf("without a portal the message links somewhere: %q", got)
	}
}

// TestAReviewedUpdateIsWordedAsTheUpdate: the review's step and answer give
// the words admission gives the same update.
func TestAReviewedUpdateIsWordedAsTheUpdate(t *testing.T) {
	cell := quota.Cell{Consumer: project, ResourceType: "example.com/cpus"}
	d := short(project, nil)
	update := route.UpdateResult{Changes: []route.ChangeResult{{Policy: "instances", Old: map[quota.Cell]int64{cell: 2}, New: map[quota.Cell]int64{cell: 5}, Decision: &d}}}
	want := Update("Instance", "vm-1", update, nil)
	if !strings.Contains(want, "would change example.com/cpus of Project web from 2 to 5 (3 more)") {
		t.Fatalf("update refusal %q does not say before, after and the growth", want)
	}
	step := route.ReviewStep{Update: &route.ObjectRef{}, Changes: []route.PolicyChange{{Policy: "instances"}}}
	res := route.ReviewStepResult{Policies: []string{"instances"}, Decisions: []quota.Decision{d},
		Charges: []route.ReviewCharge{{Policy: "instances", Cell: cell, Held: 2, New: 5}}}
	if got := Review("Instance", "vm-1", step, res, nil); got != want {
		t.Fatalf("review words the update\n  %q\nadmission words it\n  %q", got, want)
	}
}
