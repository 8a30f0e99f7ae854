package charge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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
	"k8s.io/client-go/tools/cache"
	"k8s.io/kube-openapi/pkg/validation/spec"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/engine/enginemetrics"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/claims"
	"github.com/quotaplane/quotaplane/internal/policy/governed"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
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
func New(handle *admit.Handle, systemNamespace string, exemptNamespaces []string) *Charger {
	return &Charger{handle: handle, systemNamespace: systemNamespace,
		exemptions: governed.NewExemptions(systemNamespace, exemptNamespaces), compiled: map[compiledKey]*compiledEntry{}}
}

// SetIncreaseLink makes quota refusals say where to ask for more: link
// returns the address of the request form for a consumer's resource type
// ("" when there is none).
func (ch *Charger) SetIncreaseLink(link func(consumer quota.ConsumerID, resourceType string) string) {
	ch.increaseLink = link
}

// Handle is the engine the charger decides with.
func (ch *Charger) Handle() *admit.Handle { return ch.handle }

// Charger is the charging component: every way quota is taken for an
// object asks it, and it runs the steps of doc.go in their order.
type Charger struct {
	handle          *admit.Handle
	systemNamespace string
	// exemptions are the objects no policy charges.
	exemptions      governed.Exemptions
	increaseLink    refusal.Link
	dynamic         dynamic.Interface
	kube            kubernetes.Interface
	schemasOnce     sync.Once
	schemas         *triggerschema.Resolver
	authorizer      authorizer.Authorizer
	namespaces      corelisters.NamespaceLister
	namespacesReady func() bool
	drained         <-chan struct{}

	startOnce sync.Once
	policies  *policyIndex
	// registrations tell how to convert amounts written as quantities.
	registrations cache.SharedIndexInformer
	// notServed is set while listing policies answers NotFound: the CRD is
	// not installed yet, so no policy can exist.
	notServed atomic.Bool

	mu       sync.Mutex
	compiled map[compiledKey]*compiledEntry

	claims  *claims.ClaimValidator
	reports *reporter
}

// SetDrainedNotification implements initializer.WantsDrainedNotification:
// the policy watch stops when the server drains, so shutdown never waits on it.
func (ch *Charger) SetDrainedNotification(drained <-chan struct{}) { ch.drained = drained }

// SetDynamicClient implements initializer.WantsDynamicClient.
func (ch *Charger) SetDynamicClient(c dynamic.Interface) { ch.dynamic = c }

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (ch *Charger) SetExternalKubeClientSet(c kubernetes.Interface) { ch.kube = c }

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
	if ch.dynamic == nil || ch.handle == nil || ch.authorizer == nil || ch.namespaces == nil {
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

type compiledKey struct {
	name       string
	generation int64
	// typed: compiled against the trigger kind's schema (a generation the
	// engine has not judged yet).
	typed bool
}

type compiledEntry struct {
	compiled *policy.Compiled
	err      error
}

// compile compiles one version of a policy, once.
func (ch *Charger) compile(cp *quotav1alpha1.ClaimCreationPolicy, typed bool) (*policy.Compiled, error) {
	k := compiledKey{cp.Name, cp.Generation, typed}
	ch.mu.Lock()
	if e, ok := ch.compiled[k]; ok {
		ch.mu.Unlock()
		return e.compiled, e.err
	}
	ch.mu.Unlock()
	// A generation the engine judged is compiled without the trigger's
	// schema: the engine checked its fields and cost against every served
	// version (status.enforced). One it has not judged yet is checked here
	// against the schema of the version it names, so that a misspelt field
	// is not enforced for the moment before the engine says so (the last
	// valid generation is, meanwhile); what is not checked is bounded by
	// policy.CostLimit at evaluation.
	var o policy.Options
	if typed {
		o.TriggerSchema = ch.triggerSchema(cp.Spec.Trigger.Resource)
	}
	c, err := policy.Compile(cp, o)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.compiled[k] = &compiledEntry{compiled: c, err: err}
	return c, err
}

// triggerSchema is the schema of a trigger kind's version, nil when it
// cannot be read (then nothing is checked against it).
func (ch *Charger) triggerSchema(tr quotav1alpha1.TriggerResource) *spec.Schema {
	ch.schemasOnce.Do(func() {
		if ch.kube != nil {
			ch.schemas = triggerschema.New(ch.kube.Discovery(), 0)
		}
	})
	if ch.schemas == nil {
		return nil
	}
	s, err := ch.schemas.Resolve(tr.APIVersion, tr.Kind)
	if err != nil {
		return nil
	}
	return s
}

// forget drops the compiled versions of a policy that are not in force.
func (ch *Charger) forget(name string, keep ...int64) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for k := range ch.compiled {
		if k.name == name && !containsInt(keep, k.generation) {
			delete(ch.compiled, k)
		}
	}
}

func containsInt(list []int64, v int64) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
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
	var rec *admit.CreateRecord
	if r.StoredElsewhere {
		ctx, rec = admit.WithCreateRecord(ctx)
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
	policies, err := ch.inForce(kind.Group, kind.Kind)
	if err != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("quota for this %s cannot be decided yet: %v; retry", kind.Kind, err), 1)
	}
	if policies, err = ch.scoped(ctx, a, policies); err != nil {
		return err
	}
	if len(policies) == 0 {
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
	in := policy.Input{Object: obj, User: userMap(a), RequestInfo: requestInfoMap(ctx, a), Units: ch.units}
	var claims []*quotav1alpha1.ResourceClaim
	var applying []*inForce
	for _, f := range policies {
		ok, rendered, err := f.compiled.Evaluate(in)
		if err != nil {
			// The object itself cannot be judged (a field the policy reads
			// is missing, say): never a reason to store it uncharged.
			ch.reports.result(f.name, resultInvalidObject)
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"ClaimCreationPolicy %s (generation %d) cannot be evaluated for this %s: %v; the %s was not created: give it what the policy reads, or fix the policy",
				f.name, f.generation, kind.Kind, err, kind.Kind))
		}
		if !ok {
			continue
		}
		c, err := ch.claimFor(ctx, f, rendered, a, objMeta)
		if err != nil {
			ch.reports.result(f.name, resultInvalidClaim)
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
func (ch *Charger) decide(ctx context.Context, run *call, obj metav1.Object, applying []*inForce, claims []*quotav1alpha1.ResourceClaim) error {
	a := run.Attributes
	if run.step != nil {
		run.step.Asked, run.step.Step, run.step.Policies = true, admit.ReviewStep{Claims: claims}, names(applying)
		return nil
	}
	kind := a.GetKind()
	dctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	res, err := ch.handle.DecideCreate(dctx, claims, a.IsDryRun())
	var taken *admit.NameTakenError
	switch {
	case errors.As(err, &taken):
		ch.reports.result(taken.Policy, resultNameTaken)
		return apierrors.NewConflict(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource(), taken.Claim, fmt.Errorf(
			"%v, so this %s cannot be charged and was not created; give the policy's claim template a name unique per object (for example generateName, or a name that includes {{ trigger.metadata.name }})",
			taken, kind.Kind))
	case err != nil && ignoreAll(applying) && !errors.Is(err, admit.ErrNotLeader):
		// Fail-open is for an engine that cannot decide, never for a
		// replica that cannot reach the one that decides (docs/replicas.md).
		// That one is refused, retryable, below.
		return ch.failOpen(ctx, a, obj, applying, err)
	case err != nil:
		ch.reports.resultAll(applying, resultUndecided)
		msg := fmt.Sprintf("quota for this %s could not be decided within %s: %v; the %s was not created and any quota held for it is released within seconds, retry the request", kind.Kind, decideTimeout, err, kind.Kind)
		if errors.Is(err, admit.ErrNotLeader) {
			msg = fmt.Sprintf("quota for this %s cannot be decided right now (%v); nothing was consumed, retry in a few seconds", kind.Kind, err)
		}
		return apierrors.NewTimeoutError(msg, 2)
	case res.Granted:
		ch.reports.resultAll(applying, resultGranted)
		if a.IsDryRun() {
			// What a create would cost, for whoever asks with a dry run.
			for i, f := range applying {
				warning.AddWarning(ctx, "", fmt.Sprintf("dry run: ClaimCreationPolicy %s (generation %d) would charge %s",
					f.name, f.generation, requestsText(claims[i])))
			}
			return nil
		}
		ch.handle.WaitAdmitted(claims)
		return nil
	}
	for i, d := range res.Decisions {
		if d.Outcome == "ValidationFailed" {
			ch.reports.result(applying[i].name, resultInvalidClaim)
			return apierrors.NewInternalError(fmt.Errorf("ClaimCreationPolicy %s renders a claim for this %s that the registrations refuse: %s; fix the policy or the ResourceRegistration (this is not a quota denial)",
				applying[i].name, kind.Kind, d.Message))
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
func (ch *Charger) failOpen(ctx context.Context, a admission.Attributes, obj metav1.Object, applying []*inForce, cause error) error {
	kind := a.GetKind()
	var names []string
	for _, f := range applying {
		names = append(names, f.name)
	}
	// The record comes first: it is what verify lists and what finds the
	// object later. A create whose record cannot be written is refused, as
	// with failurePolicy: Fail, rather than admitted with no trace.
	if !a.IsDryRun() {
		rec := admit.FailOpenRecord{Resource: quotav1alpha1.FormatResource(a.GetResource()), Namespace: a.GetNamespace(), Name: obj.GetName(),
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

func ignoreAll(policies []*inForce) bool {
	for _, f := range policies {
		if f.failurePolicy != quotav1alpha1.FailurePolicyIgnore {
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
