package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

// Kind is the kind of object a condition is written on.
type Kind int

const (
	KindGrant Kind = iota
	KindRegistration
	KindPolicy
)

// CauseConsumerTypeNotServed: a registration's consumer kind is not served.
const CauseConsumerTypeNotServed = "ConsumerTypeNotServed"

// Key queues a condition write: a grant by UID, a registration or a policy
// by name.
type Key struct {
	Kind Kind
	Name string
}

// ConditionWriter writes the Active condition of grants and registrations
// and the Ready condition (and enforced generation) of ClaimCreationPolicies.
type ConditionWriter struct {
	// GrantKey is the namespace/name of a grant UID the accounts know.
	GrantKey func(uid string) string
	// Grant, Registration and Policy read the cache by key.
	Grant        func(key string) (*quotav1alpha1.ResourceGrant, bool, error)
	Registration func(name string) (*quotav1alpha1.ResourceRegistration, bool, error)
	Policy       func(name string) (*quotav1alpha1.ClaimCreationPolicy, bool, error)
	// Consumer says whether a consumer exists, whether its kind is watched
	// at all, and (when it does not exist) the names of its kind that do;
	// nil: no grant's status.consumerState is written.
	Consumer func(quota.ConsumerID) (exists, watched bool, names []string)
	// Read runs a read of the accounts under the cache's lock.
	Read func(func(*accounting.Accounts))
	// Schemas are how a policy of a trigger kind is compiled: the kind's
	// OpenAPI schemas (none when unknown), and whether they are known.
	Schemas func(context.Context, quotav1alpha1.TriggerResource) (policy.Options, SchemaState)
	// UpdateStatus writes an object's status.
	UpdateStatus func(context.Context, client.Object) error

	// KindServed says whether the API server serves a kind, and when it
	// does not, what to say of it (kinds.Kind); nil: every kind is.
	KindServed func(schema.GroupKind) (bool, string, error)
	// RegisteredTypes are the resource types of the registrations known.
	RegisteredTypes func() []string
	// Event records an Event on an object; nil records none.
	Event func(obj runtime.Object, eventType, reason, message string)
	// ExpiryWarning is how long before a grant's expiry it is
	// ExpiringSoon; Now the clock grant windows are judged by (nil:
	// time.Now).
	ExpiryWarning time.Duration
	Now           func() time.Time
	// ExpiryChanged is told of a grant whose ExpiringSoon condition changed,
	// so that its buckets say so too; nil: nothing is told.
	ExpiryChanged func(quota.Grant)

	schemaWaits schemaWaits
}

// Reconcile writes the condition of a grant, registration or policy; a
// policy judged without its trigger kind's schema is judged again later.
func (w *ConditionWriter) Reconcile(ctx context.Context, k Key) (time.Duration, error) {
	switch k.Kind {
	case KindGrant:
		return w.writeGrant(ctx, k.Name)
	case KindRegistration:
		return w.writeRegistration(ctx, k.Name)
	default:
		return w.writePolicy(ctx, k.Name)
	}
}

func (w *ConditionWriter) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

func activeCondition(v quota.Validity, generation int64) metav1.Condition {
	c := metav1.Condition{Type: quotav1alpha1.GrantConditionActive, Status: metav1.ConditionTrue, Reason: v.Reason, Message: v.Message, ObservedGeneration: generation}
	if !v.Valid {
		c.Status = metav1.ConditionFalse
	}
	return c
}

func conditionChanged(existing []metav1.Condition, c metav1.Condition) bool {
	old := meta.FindStatusCondition(existing, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message || old.ObservedGeneration != c.ObservedGeneration
}

// writeGrant writes a grant's conditions and window status; it returns
// when they next change by the clock (ExpiringSoon), zero for never.
func (w *ConditionWriter) writeGrant(ctx context.Context, uid string) (time.Duration, error) {
	var v quota.Validity
	var qg quota.Grant
	var ok bool
	w.Read(func(acc *accounting.Accounts) {
		if v, ok = acc.GrantValidity(uid); ok {
			qg, _ = acc.Grant(uid)
		}
	})
	if !ok {
		return 0, nil
	}
	g, exists, err := w.Grant(w.GrantKey(uid))
	if err != nil || !exists {
		return 0, err
	}
	if v.Cause == quota.CauseResourceTypeNotRegistered && w.RegisteredTypes != nil {
		// Name the registered type nearest to each unknown one.
		for _, a := range g.Spec.Allowances {
			rt := string(a.ResourceType)
			if near := quota.Nearest(rt, w.RegisteredTypes()); near != "" && near != rt {
				v.Message += fmt.Sprintf("; %s is not registered: did you mean %s?", rt, near)
			}
		}
	}
	now := w.now()
	c := activeCondition(v, g.Generation)
	window := windowStatus(g, qg.Phase, &c, now)
	soon, next, expires := expiringSoon(g, qg.Phase, now, w.ExpiryWarning)
	var requeue time.Duration
	if !next.IsZero() {
		requeue = max(next.Sub(now), time.Second)
	}
	// Whether the consumer exists is status.consumerState, not a condition
	// nor Active's message: the reference implementation's clients read a
	// grant's conditions as exactly [Active], "ResourceGrant is active",
	// also for consumers they never create. The details go to an Event.
	state, missing := w.consumerState(g)
	if !conditionChanged(g.Status.Conditions, c) && g.Status.ObservedGeneration == g.Generation &&
		g.Status.ConsumerState == state && meta.FindStatusCondition(g.Status.Conditions, quotav1alpha1.GrantConditionConsumerFound) == nil &&
		equality.Semantic.DeepEqual(g.Status.Window, window) &&
		(expires && !conditionChanged(g.Status.Conditions, soon) || !expires && meta.FindStatusCondition(g.Status.Conditions, quotav1alpha1.GrantConditionExpiringSoon) == nil) {
		return requeue, nil
	}
	// The window's Events are recorded once the status that holds them is
	// written, so a write that conflicts and is retried raises them once.
	var windowEvents [][3]string
	if expires && soon.Status == metav1.ConditionTrue && !meta.IsStatusConditionTrue(g.Status.Conditions, soon.Type) {
		windowEvents = append(windowEvents, [3]string{corev1.EventTypeWarning, soon.Reason, soon.Message})
	}
	if et, reason, msg, ok := windowEvent(g, window, c); ok {
		windowEvents = append(windowEvents, [3]string{et, reason, msg})
	}
	soonChanged := expires && conditionChanged(g.Status.Conditions, soon)
	if v.Cause == quota.CauseResourceTypeNotRegistered && w.Event != nil {
		w.Event(g, corev1.EventTypeWarning, quota.CauseResourceTypeNotRegistered, c.Message)
	}
	if state == quotav1alpha1.GrantConsumerMissing && g.Status.ConsumerState != state && w.Event != nil &&
		!meta.IsStatusConditionFalse(g.Status.Conditions, quotav1alpha1.GrantConditionConsumerFound) {
		w.Event(g, corev1.EventTypeWarning, quotav1alpha1.GrantReasonConsumerNotFound, missing)
	}
	updated := g.DeepCopy()
	updated.Status.ObservedGeneration = g.Generation
	updated.Status.Window = window
	updated.Status.ConsumerState = state
	meta.SetStatusCondition(&updated.Status.Conditions, c)
	if expires {
		meta.SetStatusCondition(&updated.Status.Conditions, soon)
	} else {
		meta.RemoveStatusCondition(&updated.Status.Conditions, quotav1alpha1.GrantConditionExpiringSoon)
	}
	// Written by earlier versions; a grant's conditions are the reference
	// implementation's (docs/conditions.md).
	meta.RemoveStatusCondition(&updated.Status.Conditions, quotav1alpha1.GrantConditionConsumerFound)
	if err := w.UpdateStatus(ctx, updated); err != nil {
		return 0, err
	}
	for _, e := range windowEvents {
		if w.Event != nil {
			w.Event(g, e[0], e[1], e[2])
		}
	}
	if soonChanged && w.ExpiryChanged != nil {
		w.ExpiryChanged(qg)
	}
	return requeue, nil
}

// consumerState is the status.consumerState of a grant naming an
// Organization, a Project or a Namespace ("" for other grants), and when
// its consumer is missing, the message of the Warning Event that says so.
// The nearest existing name is said only on the platform's grants: a grant
// an organization wrote from its budget would tell its readers other
// tenants' names.
func (w *ConditionWriter) consumerState(g *quotav1alpha1.ResourceGrant) (quotav1alpha1.GrantConsumerState, string) {
	if w.Consumer == nil || g.Spec.ConsumerSelector != nil || g.Spec.ConsumerRef.Name == "" {
		return "", ""
	}
	id := convert.ConsumerID(g.Spec.ConsumerRef)
	exists, watched, names := w.Consumer(id)
	switch {
	case !watched:
		return "", ""
	case exists:
		return quotav1alpha1.GrantConsumerFound, ""
	}
	msg := fmt.Sprintf("there is no %s %s, so this grant limits nothing until one is created", id.Kind, id.Name)
	if g.Labels[quotav1alpha1.BudgetLabel] == "" {
		if near := quota.Nearest(id.Name, names); near != "" {
			msg += fmt.Sprintf("; did you mean %s?", near)
		}
	}
	msg += "; correct spec.consumerRef.name, or create the " + id.Kind
	return quotav1alpha1.GrantConsumerMissing, msg
}

func (w *ConditionWriter) writeRegistration(ctx context.Context, name string) (time.Duration, error) {
	r, exists, err := w.Registration(name)
	if err != nil || !exists {
		return 0, err
	}
	var again time.Duration
	var v quota.Validity
	var grants, claims int
	w.Read(func(acc *accounting.Accounts) {
		v = acc.RegistrationValidity(name)
		grants, claims = acc.RegistrationUsers(string(r.Spec.ResourceType))
	})
	if v.Cause == quota.CauseDeleting && grants+claims > 0 {
		v.Message += "; still used by " + plural(grants, "grant") + " and " + plural(claims, "claim") + ", which are flagged invalid"
	}
	if v.Valid && w.KindServed != nil {
		// A consumer kind not served (a typo, or a CRD not installed yet)
		// is reported: not Active until it is served. The accounts are
		// left as they are, so that verify, which reads no discovery,
		// computes the same numbers.
		gk := schema.GroupKind{Group: r.Spec.ConsumerType.APIGroup, Kind: r.Spec.ConsumerType.Kind}
		if ok, hint, err := w.KindServed(gk); err == nil && !ok {
			// Looked for again, less and less often (a CRD just installed
			// is in discovery a few seconds after it is created).
			_, again = w.schemaWaits.next("registration/"+name, r.Generation, KindNotServed, true)
			v = quota.Validity{Reason: quota.ReasonValidationFailed, Cause: CauseConsumerTypeNotServed, Message: fmt.Sprintf(
				"spec.consumerType: %s is not served by this API server (%s); the registration becomes Active once it is: correct the kind, or install it",
				kinds.KindString(gk), hint)}
		}
	}
	if again == 0 {
		w.schemaWaits.forget("registration/" + name)
	}
	c := activeCondition(v, r.Generation)
	if !conditionChanged(r.Status.Conditions, c) && r.Status.ObservedGeneration == r.Generation {
		return again, nil
	}
	if v.Cause == CauseConsumerTypeNotServed && w.Event != nil {
		w.Event(r, corev1.EventTypeWarning, CauseConsumerTypeNotServed, c.Message)
	}
	updated := r.DeepCopy()
	updated.Status.ObservedGeneration = r.Generation
	meta.SetStatusCondition(&updated.Status.Conditions, c)
	return again, w.UpdateStatus(ctx, updated)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// writePolicy validates a ClaimCreationPolicy and writes its Ready
// condition: CEL constraints compile to bool, every template parses and
// type-checks, literals are valid, each expression's estimated cost (with
// `trigger` typed from the trigger kind's schema, when it is served) is
// within the limit, literal resource types are registered; disabled is not
// Ready.
func (w *ConditionWriter) writePolicy(ctx context.Context, name string) (time.Duration, error) {
	cp, exists, err := w.Policy(name)
	if err != nil || !exists {
		w.schemaWaits.forget(name)
		return 0, err
	}
	c := metav1.Condition{Type: quotav1alpha1.PolicyConditionReady, Status: metav1.ConditionTrue, Reason: policy.ReasonReady,
		Message: quota.PolicyReadyMessage, ObservedGeneration: cp.Generation}
	opts, state := w.Schemas(ctx, cp.Spec.Trigger.Resource)
	enforcedNow := cp.Status.Enforced != nil && cp.Status.Enforced.Generation == cp.Generation
	wait, again := w.schemaWaits.next(name, cp.Generation, state, enforcedNow || cp.Spec.Disabled)
	compiled, cerr := policy.Compile(cp, opts)
	var perr *policy.Error
	switch {
	case wait && cerr == nil:
		tr := cp.Spec.Trigger.Resource
		c.Status, c.Reason = metav1.ConditionFalse, policy.ReasonValidationFailed
		c.Message = fmt.Sprintf("spec.trigger.resource: waiting for the schema of kind %s (apiVersion %s), just served, to check the fields the expressions read; "+
			"judged without it if it cannot be read within %s", tr.Kind, tr.APIVersion, schemaWaitTotal)
	case errors.As(cerr, &perr):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, perr.Reason, perr.Error()
	case cerr != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, policy.ReasonValidationFailed, cerr.Error()
	case cp.Spec.Disabled:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, policy.ReasonDisabled, "spec.disabled is true; creates are not charged"
	default:
		var err error
		w.Read(func(acc *accounting.Accounts) {
			err = compiled.CheckRegistered(acc.IsRegistered)
			if err == nil {
				err = compiled.CheckUnits(acc.BaseUnitQuantity)
			}
		})
		if err != nil {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, policy.ReasonValidationFailed, err.Error()
		}
	}
	enforced, trial := cp.Status.Enforced, cp.Status.Trial
	mode := quotav1alpha1.ModeOf(cp.Spec.Mode)
	switch {
	case c.Status == metav1.ConditionTrue && mode == quotav1alpha1.PolicyModeEnforce:
		// This generation is valid: admission enforces it from now on,
		// also after a restart, even if a later edit is invalid.
		enforced = &quotav1alpha1.EnforcedClaimPolicy{Generation: cp.Generation, Trigger: cp.Spec.Trigger,
			Target: cp.Spec.Target, FailurePolicy: cp.Spec.FailurePolicy}
		trial = nil
	case c.Status == metav1.ConditionTrue:
		// Valid, in Warn or Audit: tried on every create, charging nothing;
		// staged, beside the generation enforced before it, which keeps
		// enforcing; not staged, alone (enforcement stops, as with
		// disabled).
		trial = &quotav1alpha1.TrialClaimPolicy{Generation: cp.Generation, Mode: mode, Staged: cp.Spec.Staged,
			Trigger: cp.Spec.Trigger, Target: cp.Spec.Target}
		if !cp.Spec.Staged {
			enforced = nil
		}
	case c.Reason != policy.ReasonDisabled && cerr != nil && enforced != nil && enforced.Generation == cp.Generation:
		// This generation was enforced when it was judged without the
		// trigger kind's schema (the kind was not served yet); judged
		// against the schema it is invalid, and no earlier one is known.
		enforced = nil
		c.Message += "; this generation was enforced before the schema of its trigger kind could be read, and is not enforced until this is fixed"
	case c.Reason != policy.ReasonDisabled && enforced != nil:
		c.Message += fmt.Sprintf("; generation %d, the last valid one, stays enforced until this is fixed", enforced.Generation)
	case c.Reason != policy.ReasonDisabled:
		c.Message += "; no generation of this policy was ever valid, so it is not enforced until this is fixed"
	}
	var warnings []policy.Warning
	if cerr == nil && compiled != nil {
		warnings = compiled.Warnings
	}
	if state == KindNotServed {
		warnings = append(warnings, w.kindNotServed(cp.Spec.Trigger.Resource)...)
	}
	typeChecking, checked := policy.TypeChecking(warnings, cp.Generation)
	modeNow := modeInForce(cp.Spec.Disabled, enforced, trial)
	if !conditionChanged(cp.Status.Conditions, c) && cp.Status.ObservedGeneration == cp.Generation &&
		equality.Semantic.DeepEqual(enforced, cp.Status.Enforced) && equality.Semantic.DeepEqual(trial, cp.Status.Trial) && modeNow == cp.Status.Mode && (trial != nil || cp.Status.Impact == nil) &&
		equality.Semantic.DeepEqual(typeChecking, cp.Status.TypeChecking) && !typeCheckedChanged(cp.Status.Conditions, checked) {
		return again, nil
	}
	updated := cp.DeepCopy()
	updated.Status.ObservedGeneration = cp.Generation
	updated.Status.Enforced, updated.Status.Trial, updated.Status.Mode = enforced, trial, modeNow
	if trial == nil {
		updated.Status.Impact = nil
	}
	updated.Status.TypeChecking = typeChecking
	meta.SetStatusCondition(&updated.Status.Conditions, c)
	policy.SetTypeChecked(&updated.Status.Conditions, checked)
	return again, w.UpdateStatus(ctx, updated)
}

// modeInForce is status.mode: what admission applies now.
func modeInForce(disabled bool, enforced *quotav1alpha1.EnforcedClaimPolicy, trial *quotav1alpha1.TrialClaimPolicy) string {
	switch {
	case disabled:
		return ""
	case enforced != nil && trial != nil:
		return string(quotav1alpha1.PolicyModeEnforce) + "+" + string(trial.Mode)
	case enforced != nil:
		return string(quotav1alpha1.PolicyModeEnforce)
	case trial != nil:
		return string(trial.Mode)
	}
	return ""
}
