package charge

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/warning"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// AnnotationTrial is the audit annotation a create judged by a policy in
// mode Warn or Audit carries: what enforcing would have done.
const AnnotationTrial = "quota.miloapis.com/trial"

// trialTimeout bounds how long a create waits for the engine to say what a
// trial would do: a trial charges nothing, so it never holds a create as
// long as a decision may (decideTimeout); past it, the answer is undecided.
const trialTimeout = 2 * time.Second

// tryTrials runs the versions on trial (mode Warn or Audit) for one create:
// each is evaluated and rendered as if it enforced, and the requester must
// be allowed to charge each consumer — the one answer a trial gives, a
// refusal, as enforcing would (step 4 runs in every mode). The engine is
// then asked what enforcing would do, taking nothing (step 5 in Review
// mode), and the outcome is recorded: counted by mode, a warning to the
// client in mode Warn, an audit annotation in both. A failure to evaluate
// or decide is recorded, never a refusal: nothing is charged.
func (ch *Charger) tryTrials(ctx context.Context, run *call, trials []*inforce.Policy, in policy.Input, obj metav1.Object) error {
	a := run.Attributes
	kind := a.GetKind().Kind
	var notes []string
	note := func(f *inforce.Policy, result, what string) {
		ch.reports.resultFor(f, result)
		text := fmt.Sprintf("ClaimCreationPolicy %s (generation %d, mode %s): %s; nothing was charged", f.Name, f.Generation, f.Mode, what)
		notes = append(notes, text)
		switch {
		case run.step != nil:
		case a.IsDryRun():
			// Whoever asks what a create would do learns it, in either mode.
			warning.AddWarning(ctx, "", "dry run: "+text)
		case f.Mode == quotav1alpha1.PolicyModeWarn:
			warning.AddWarning(ctx, "", text)
		}
	}
	var claims []*quotav1alpha1.ResourceClaim
	var applying []*inforce.Policy
	for _, f := range trials {
		ok, rendered, err := f.Compiled.Evaluate(in)
		if err != nil {
			note(f, resultInvalidObject, fmt.Sprintf("enforcing, it would refuse this %s: it cannot be evaluated for it: %v; fix the policy, or give the %s what the policy reads", kind, err, kind))
			continue
		}
		if !ok {
			continue
		}
		c, err := ch.claimFor(ctx, f, rendered, a, obj)
		if apierrors.IsForbidden(err) {
			// A consumer this place may not charge (a plane's object
			// charged to another plane's): refused in every mode, as
			// authorization is.
			ch.reports.resultFor(f, resultUnauthorized)
			return err
		}
		if err != nil {
			note(f, resultInvalidClaim, fmt.Sprintf("enforcing, it would refuse this %s: %v", kind, err))
			continue
		}
		claims, applying = append(claims, c), append(applying, f)
	}
	if len(claims) > 0 {
		if err := ch.authorizeConsumers(ctx, run, applying, claims); err != nil {
			return err
		}
	}
	if len(claims) > 0 && run.step == nil {
		steps := make([]route.ReviewStep, len(claims))
		for i, c := range claims {
			steps[i] = route.ReviewStep{Claims: []*quotav1alpha1.ResourceClaim{c}}
		}
		dctx, cancel := context.WithTimeout(ctx, trialTimeout)
		res, err := ch.handle.Review(dctx, steps)
		cancel()
		for i, f := range applying {
			switch {
			case err != nil || i >= len(res.Steps):
				note(f, resultUndecided, fmt.Sprintf("what enforcing would do could not be decided (%v)", err))
			case res.Steps[i].Granted:
				note(f, resultWouldCharge, "enforcing, it would charge "+requestsText(claims[i]))
			default:
				note(f, resultWouldRefuse, "enforcing, it would refuse this "+kind+": "+refusal.Review(kind, a.GetName(), steps[i], res.Steps[i], ch.increaseLink))
			}
		}
	}
	if len(notes) > 0 && run.step == nil {
		_ = a.AddAnnotation(AnnotationTrial, truncate(strings.Join(notes, "; "), 4096))
	}
	return nil
}
