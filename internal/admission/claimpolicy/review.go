package claimpolicy

import (
	"context"

	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
)

// Reviewing: a QuotaReview runs this plugin on each object it holds, as a
// create or an update would, up to the question to the engine. Instead of
// asking, the plugin leaves what it would have asked in the review's step,
// and the review asks the engine for all its steps at once, in order
// (admit.Handle.Review). Everything before — exemptions, scoping, rendering,
// the claim's checks, the consumer's authorization — is the same code.

type reviewKey struct{}

// ReviewStep is what the plugin would ask the engine for one object: empty
// (Asked false) when nothing charges it.
type ReviewStep struct {
	Asked bool
	Step  admit.ReviewStep
	// Policies are the ClaimCreationPolicies charging it, by claim (a
	// create) or by change (an update).
	Policies []string
}

// WithReview is ctx for validating one object of a review: the plugin then
// asks the engine nothing, and fills the step returned.
func WithReview(ctx context.Context) (context.Context, *ReviewStep) {
	s := &ReviewStep{}
	return context.WithValue(ctx, reviewKey{}, s), s
}

func reviewOf(ctx context.Context) *ReviewStep {
	s, _ := ctx.Value(reviewKey{}).(*ReviewStep)
	return s
}

func names(applying []*inForce) []string {
	out := make([]string, len(applying))
	for i, f := range applying {
		out[i] = f.name
	}
	return out
}

// Refusal is the message admission would refuse a reviewed object with,
// given the engine's decision on its step: the same words, and the same
// link to ask for more.
func (p *Plugin) Refusal(kind, name string, step admit.ReviewStep, res admit.ReviewStepResult) string {
	return refusal.Review(kind, name, step, res, p.increaseLink)
}
