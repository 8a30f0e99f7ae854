package charge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/charge/arrivals"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/claims"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// decideTimeout bounds how long a create waits for the engine.
const decideTimeout = 10 * time.Second

// failOpenRecordTimeout bounds writing a fail-open admission's record to
// etcd; past it the create is refused.
const failOpenRecordTimeout = 5 * time.Second

// New is the charging component of this process's engine. Objects in the
// system namespace and in exemptNamespaces are never charged
// (internal/policy/governed). It is ready once the clients below are set
// and Ready has returned nil (the admission plugin's initializers do both).
func New(handle *route.Handle, systemNamespace string, exemptNamespaces []string) *Charger {
	return &Charger{handle: handle, systemNamespace: systemNamespace,
		exemptions: governed.NewExemptions(systemNamespace, exemptNamespaces), policies: inforce.New(decideTimeout)}
}

// SetIncreaseLink makes quota refusals say where to ask for more: link
// returns the address of the request form for a consumer's resource type
// ("" when there is none).
func (ch *Charger) SetIncreaseLink(link func(consumer quota.ConsumerID, resourceType string) string) {
	ch.increaseLink = link
}

// Units is what one base unit of a resource type is, as its registration
// declares it: policies' amounts written as quantities are converted with it.
func (ch *Charger) Units(resourceType string) (string, bool) { return ch.policies.Units(resourceType) }

// SystemNamespace holds the claims of cluster-scoped objects.
func (ch *Charger) SystemNamespace() string { return ch.systemNamespace }

// Exemptions are the objects no policy charges.
func (ch *Charger) Exemptions() governed.Exemptions { return ch.exemptions }

// Handle is the engine the charger decides with.
func (ch *Charger) Handle() *route.Handle { return ch.handle }

// Charger is the charging component: every way quota is taken for an
// object asks it, and it runs the steps of doc.go in their order.
type Charger struct {
	handle          *route.Handle
	systemNamespace string
	// exemptions are the objects no policy charges.
	exemptions      governed.Exemptions
	increaseLink    refusal.Link
	kube            kubernetes.Interface
	authorizer      authorizer.Authorizer
	namespaces      corelisters.NamespaceLister
	namespacesReady func() bool
	// policies are the ClaimCreationPolicies in force (step 2).
	policies *inforce.Index

	claims  *claims.ClaimValidator
	reports *reporter
}

// SetDrainedNotification implements initializer.WantsDrainedNotification:
// the policy watch stops when the server drains, so shutdown never waits on it.
func (ch *Charger) SetDrainedNotification(drained <-chan struct{}) { ch.policies.Drained = drained }

// SetDynamicClient implements initializer.WantsDynamicClient.
func (ch *Charger) SetDynamicClient(c dynamic.Interface) { ch.policies.Dynamic = c }

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (ch *Charger) SetExternalKubeClientSet(c kubernetes.Interface) {
	ch.kube, ch.policies.Kube = c, c
}

// SetAuthorizer implements initializer.WantsAuthorizer.
func (ch *Charger) SetAuthorizer(a authorizer.Authorizer) { ch.authorizer = a }

// SetExternalKubeInformerFactory implements
// initializer.WantsExternalKubeInformerFactory: namespaces are checked from
// the server's shared informer.
func (ch *Charger) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	inf := f.Core().V1().Namespaces()
	ch.namespaces = inf.Lister()
	ch.namespacesReady = inf.Informer().HasSynced
}

// Ready checks that the charger has what it needs, and prepares what it
// builds from it; the admission plugin calls it from its
// ValidateInitialization.
func (ch *Charger) Ready() error {
	if ch.policies.Dynamic == nil || ch.handle == nil || ch.authorizer == nil || ch.namespaces == nil {
		return fmt.Errorf("the charging component needs a dynamic client, an authorizer, the namespace informer and the engine handle")
	}
	v, err := claims.NewClaimValidator()
	if err != nil {
		return err
	}
	ch.claims = v
	ch.reports = newReporter(ch)
	return nil
}

// Charge runs the steps of doc.go for one create, or one update that
// changes what the policies compute (update.go), in r's mode. Status
// updates are never charged, nor the objects internal/policy/governed
// exempts (exempt.go). The error is the answer to give the request: nil
// admits it. In Review mode the step the engine would be asked is returned
// instead of asked (Step.Asked false when nothing charges the object).
func (ch *Charger) Charge(ctx context.Context, r Request) (Result, error) {
	run := &call{Request: r}
	if r.Mode == Review {
		run.step = &Step{}
	}
	var rec *route.RequestGrants
	if r.StoredElsewhere {
		ctx, rec = route.WithRequestGrants(ctx)
	}
	err := ch.steps(ctx, run)
	res := Result{Step: run.step}
	if rec != nil && err == nil && !r.Attributes.IsDryRun() {
		// Record: stored where this server cannot tell, so settled now.
		ch.handle.CreateEnded(rec, http.StatusOK)
		res.Charged = !rec.Empty()
	}
	return res, err
}

func (ch *Charger) steps(ctx context.Context, run *call) error {
	if ReviewPass(run.Attributes) {
		return nil
	}
	if exempt, err := ch.exempt(ctx, run.Attributes); exempt || err != nil {
		return err
	}
	a := run.Attributes
	switch {
	case a.GetOperation() == admission.Create && a.GetSubresource() == "":
		return ch.chargeCreate(ctx, run)
	case a.GetOperation() == admission.Update && (a.GetSubresource() == "" || a.GetSubresource() == "scale"):
		return ch.chargeUpdate(ctx, run)
	}
	return nil
}

// chargeCreate runs the steps for a create.
func (ch *Charger) chargeCreate(ctx context.Context, run *call) error {
	a, o := run.Attributes, run.Objects
	kind := a.GetKind()
	policies, err := ch.policies.InForce(kind.Group, kind.Kind)
	if err != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("quota for this %s cannot be decided yet: %v; retry", kind.Kind, err), 1)
	}
	if policies, err = ch.scoped(ctx, a, policies); err != nil {
		return err
	}
	var trials []*inforce.Policy
	if run.Mode != Existing {
		// An object a member cluster stores already is charged by what
		// enforces; a trial judges requests.
		if trials, err = ch.policies.Trials(kind.Group, kind.Kind); err != nil {
			return apierrors.NewTimeoutError(fmt.Sprintf("quota for this %s cannot be decided yet: %v; retry", kind.Kind, err), 1)
		}
		if trials, err = ch.scoped(ctx, a, trials); err != nil {
			return err
		}
	}
	if len(policies) == 0 && len(trials) == 0 {
		return nil
	}
	// Policies see the object as the client sent it (its versioned form),
	// not the server's internal form.
	versioned, err := admission.NewVersionedAttributes(a, kind, o)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", kind.Kind, err))
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned.VersionedObject)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", kind.Kind, err))
	}
	objMeta, err := meta.Accessor(versioned.VersionedObject)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	in := policy.Input{Object: obj, User: userMap(a), RequestInfo: requestInfoMap(ctx, a), Units: ch.policies.Units}
	if len(trials) > 0 {
		if err := ch.tryTrials(ctx, run, trials, in, objMeta); err != nil {
			return err
		}
	}
	var claims []*quotav1alpha1.ResourceClaim
	var applying []*inforce.Policy
	for _, f := range policies {
		ok, rendered, err := f.Compiled.Evaluate(in)
		if err != nil {
			// The object itself cannot be judged (a field the policy reads
			// is missing, say): never a reason to store it uncharged.
			ch.reports.result(f.Name, resultInvalidObject)
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"ClaimCreationPolicy %s (generation %d) cannot be evaluated for this %s: %v; the %s was not created: give it what the policy reads, or fix the policy",
				f.Name, f.Generation, kind.Kind, err, kind.Kind))
		}
		if !ok {
			continue
		}
		c, err := ch.claimFor(ctx, f, rendered, a, objMeta)
		if err != nil {
			ch.reports.result(f.Name, resultInvalidClaim)
			return err
		}
		claims = append(claims, c)
		applying = append(applying, f)
	}
	if len(claims) == 0 {
		return nil
	}
	if err := ch.authorizeConsumers(ctx, run, applying, claims); err != nil {
		return err
	}
	return ch.decide(ctx, run, objMeta, applying, claims)
}

// decide asks the engine for the claims of one create and answers.
func (ch *Charger) decide(ctx context.Context, run *call, obj metav1.Object, applying []*inforce.Policy, claims []*quotav1alpha1.ResourceClaim) error {
	a := run.Attributes
	if run.step != nil {
		run.step.Asked, run.step.Step, run.step.Policies = true, route.ReviewStep{Claims: claims}, names(applying)
		return nil
	}
	kind := a.GetKind()
	dctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	res, err := ch.handle.DecideCreate(dctx, claims, a.IsDryRun())
	if err == nil && !res.Granted {
		var answer error
		waiter := arrivals.Waiter{Handle: ch.handle, Dynamic: ch.policies.Dynamic}
		if res, answer, err = waiter.Await(dctx, a, claims, names(applying), res); answer != nil {
			ch.reports.resultAll(applying, resultDenied)
			return answer
		}
	}
	var taken *route.NameTakenError
	switch {
	case errors.As(err, &taken):
		ch.reports.result(taken.Policy, resultNameTaken)
		return apierrors.NewConflict(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource(), taken.Claim, fmt.Errorf(
			"%v, so this %s cannot be charged and was not created; give the policy's claim template a name unique per object (for example generateName, or a name that includes {{ trigger.metadata.name }})",
			taken, kind.Kind))
	case err != nil && ignoreAll(applying) && !errors.Is(err, route.ErrNotLeader):
		// Fail-open is for an engine that cannot decide, never for a
		// replica that cannot reach the one that decides (docs/replicas.md).
		// That one is refused, retryable, below.
		return ch.failOpen(ctx, a, obj, applying, err)
	case err != nil:
		ch.reports.resultAll(applying, resultUndecided)
		msg := fmt.Sprintf("quota for this %s could not be decided within %s: %v; the %s was not created and any quota held for it is released within seconds, retry the request", kind.Kind, decideTimeout, err, kind.Kind)
		if errors.Is(err, route.ErrNotLeader) {
			msg = fmt.Sprintf("quota for this %s cannot be decided right now (%v); nothing was consumed, retry in a few seconds", kind.Kind, err)
		}
		return apierrors.NewTimeoutError(msg, 2)
	case res.Granted:
		ch.reports.resultAll(applying, resultGranted)
		if a.IsDryRun() {
			// What a create would cost, for whoever asks with a dry run.
			for i, f := range applying {
				warning.AddWarning(ctx, "", fmt.Sprintf("dry run: ClaimCreationPolicy %s (generation %d) would charge %s",
					f.Name, f.Generation, requestsText(claims[i])))
			}
		}
		return nil
	}
	for i, d := range res.Decisions {
		if d.Outcome == "ValidationFailed" {
			ch.reports.result(applying[i].Name, resultInvalidClaim)
			return apierrors.NewInternalError(fmt.Errorf("ClaimCreationPolicy %s renders a claim for this %s that the registrations refuse: %s; fix the policy or the ResourceRegistration (this is not a quota denial)",
				applying[i].Name, kind.Kind, d.Message))
		}
	}
	ch.reports.resultAll(applying, resultDenied)
	msg := refusal.Create(kind.Kind, a.GetName(), res, ch.increaseLink)
	ch.reports.denied(applying, msg)
	ch.recordRefusal(a, applying, claims, msg)
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), errors.New(msg))
}

// failOpen admits a create whose quota could not be decided, every policy
// governing it being failurePolicy: Ignore — and says so: a record that
// quotaplane verify lists, a metric, a Warning Event on each policy, and a
// warning to the client.
func (ch *Charger) failOpen(ctx context.Context, a admission.Attributes, obj metav1.Object, applying []*inforce.Policy, cause error) error {
	kind := a.GetKind()
	var names []string
	for _, f := range applying {
		names = append(names, f.Name)
	}
	// The record comes first: it is what verify lists and what finds the
	// object later. A create whose record cannot be written is refused, as
	// with failurePolicy: Fail, rather than admitted with no trace.
	if !a.IsDryRun() {
		rec := route.FailOpenRecord{Resource: quotav1alpha1.FormatResource(a.GetResource()), Namespace: a.GetNamespace(), Name: obj.GetName(),
			UID: string(obj.GetUID()), Policies: names, Reason: cause.Error(), Time: time.Now().UTC().Format(time.RFC3339)}
		rctx, cancel := context.WithTimeout(ctx, failOpenRecordTimeout)
		defer cancel()
		if err := ch.handle.RecordFailOpen(rctx, rec); err != nil {
			enginemetrics.RecordsDropped.WithLabelValues(enginemetrics.RecordFailOpen).Inc()
			ch.reports.logger(ctx).Error(err, "Recording a fail-open admission failed; the create is refused", "object", objectName(a))
			ch.reports.resultAll(applying, resultUndecided)
			return apierrors.NewTimeoutError(fmt.Sprintf(
				"quota for this %s could not be decided (%v), and the record of admitting it without quota (policies %v have failurePolicy: Ignore) could not be written (%v); the %s was not created, retry the request",
				kind.Kind, cause, names, err, kind.Kind), 2)
		}
	}
	msg := fmt.Sprintf("%s %s was admitted WITHOUT quota (fail-open): quota could not be decided (%v) and every policy governing it, %v, has failurePolicy: Ignore",
		kind.Kind, objectName(a), cause, names)
	ch.reports.resultAll(applying, resultFailOpen)
	ch.reports.failedOpen(ctx, applying, msg)
	_ = a.AddAnnotation("quota.miloapis.com/fail-open", msg)
	return nil
}

func objectName(a admission.Attributes) string {
	if a.GetNamespace() == "" {
		return a.GetName()
	}
	return a.GetNamespace() + "/" + a.GetName()
}

func ignoreAll(policies []*inforce.Policy) bool {
	for _, f := range policies {
		if f.FailurePolicy != quotav1alpha1.FailurePolicyIgnore {
			return false
		}
	}
	return true
}

// requestsText is what a claim asks for, as "2 of example.com/cpus for
// Organization acme".
func requestsText(c *quotav1alpha1.ResourceClaim) string {
	var parts []string
	for _, r := range c.Spec.Requests {
		parts = append(parts, fmt.Sprintf("%d of %s", r.Amount, r.ResourceType))
	}
	return strings.Join(parts, ", ") + " to " + claimauthz.ConsumerName(c.Spec.ConsumerRef)
}
