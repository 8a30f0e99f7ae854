package charge

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/charge/inforce"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// validateUpdate charges an update by the difference it makes: every policy
// in force is evaluated on the object before and after; where the result
// differs, the claim it renders now replaces what the object holds, the
// growth decided in the request, all policies together. An update that
// changes nothing the policies read costs two evaluations and nothing else.
// An object being deleted is charged like any other: while a finalizer holds
// it, whatever reads its spec sees what it asks for (its claims go with it).
func (ch *Charger) chargeUpdate(ctx context.Context, run *call) error {
	a, o := run.Attributes, run.Objects
	tg, oldObj, newObj, err := ch.updatedObjects(ctx, a, o)
	if err != nil || oldObj == nil {
		return err
	}
	policies, err := ch.policies.InForce(tg.kind.Group, tg.kind.Kind)
	if err != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("quota for this %s cannot be decided yet: %v; retry", tg.kind.Kind, err), 1)
	}
	if policies, err = ch.scoped(ctx, a, policies); err != nil {
		return err
	}
	if len(policies) == 0 {
		return nil
	}
	oldMeta, err := meta.Accessor(&unstructured.Unstructured{Object: oldObj})
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	newU := &unstructured.Unstructured{Object: newObj}
	user, info := userMap(a), requestInfoMap(ctx, a)
	var changes []route.PolicyChange
	var applying []*inforce.Policy
	for _, f := range policies {
		newIn := policy.Input{Object: newObj, User: user, RequestInfo: info, Units: ch.policies.Units}
		okNew, rNew, err := f.Compiled.Evaluate(newIn)
		if err != nil {
			ch.reports.result(f.Name, resultInvalidObject)
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"ClaimCreationPolicy %s (generation %d) cannot be evaluated for this %s as updated: %v; the update was not stored: give it what the policy reads, or fix the policy",
				f.Name, f.Generation, tg.kind.Kind, err))
		}
		okOld, rOld, errOld := f.Compiled.Evaluate(policy.Input{Object: oldObj, User: user, RequestInfo: info, Units: ch.policies.Units})
		if errOld == nil && okOld == okNew && (!okNew || sameCharge(rOld, rNew)) {
			continue // nothing this policy reads changed
		}
		change := route.PolicyChange{Policy: f.Name, Check: route.UpdateCheck{Generation: f.Generation, Trigger: f.Trigger, Target: f.Target, User: user, RequestInfo: info}}
		if okNew {
			c, err := ch.claimForObject(ctx, f, rNew, a, tg, newU)
			if err != nil {
				ch.reports.result(f.Name, resultInvalidClaim)
				return err
			}
			change.Claim = c
		}
		changes = append(changes, change)
		applying = append(applying, f)
	}
	if len(changes) == 0 {
		// An earlier run of admission in this request (before the storage
		// retried on a conflict) may have decided a change this object, as
		// it is now, does not make.
		if err := ch.handle.UndoEarlierAttempt(ctx, string(oldMeta.GetUID())); err != nil {
			return apierrors.NewTimeoutError(fmt.Sprintf("quota for this update of %s %s could not be settled: %v; retry", tg.kind.Kind, a.GetName(), err), 2)
		}
		return nil
	}
	var claims []*quotav1alpha1.ResourceClaim
	var charging []*inforce.Policy
	for i, change := range changes {
		if change.Claim != nil {
			claims, charging = append(claims, change.Claim), append(charging, applying[i])
		}
	}
	if err := ch.authorizeConsumers(ctx, run, charging, claims); err != nil {
		return err
	}
	ref := route.ObjectRef{APIGroup: tg.kind.Group, Kind: tg.kind.Kind, Resource: quotav1alpha1.FormatResource(tg.resource),
		Namespace: a.GetNamespace(), Name: a.GetName(), UID: string(oldMeta.GetUID())}
	if plane, ok := planes.From(ctx); ok {
		ref.Plane = plane.String()
	}
	return ch.decideUpdate(ctx, run, tg, oldMeta, ref, applying, changes)
}

// sameCharge reports whether two renderings charge the same: the same
// consumer, the same amounts. Names, labels and annotations of the claim do
// not change what is charged.
func sameCharge(a, b *policy.Rendered) bool {
	if a.Spec.ConsumerRef != b.Spec.ConsumerRef {
		return false
	}
	x := convert.Claim(&quotav1alpha1.ResourceClaim{Spec: a.Spec})
	y := convert.Claim(&quotav1alpha1.ResourceClaim{Spec: b.Spec})
	return quota.SameHolding([]quota.Claim{x}, []quota.Claim{y})
}

// decideUpdate asks the engine for the changes of one update and answers.
func (ch *Charger) decideUpdate(ctx context.Context, run *call, tg target, obj metav1.Object, ref route.ObjectRef, applying []*inforce.Policy, changes []route.PolicyChange) error {
	a := run.Attributes
	if run.step != nil {
		run.step.Asked, run.step.Step, run.step.Policies = true, route.ReviewStep{Update: &ref, Changes: changes}, names(applying)
		return nil
	}
	kind := tg.kind.Kind
	dctx, cancel := context.WithTimeout(ctx, decideTimeout)
	defer cancel()
	res, err := ch.handle.DecideUpdate(dctx, ref, changes, a.IsDryRun())
	var taken *route.NameTakenError
	switch {
	case errors.As(err, &taken):
		ch.reports.result(taken.Policy, resultNameTaken)
		return apierrors.NewConflict(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims").GroupResource(), taken.Claim, fmt.Errorf(
			"%v, so this update of %s %s cannot be charged and was not stored; retry, or give the policy's claim template a name unique per object", taken, kind, a.GetName()))
	case err != nil && ignoreAll(applying) && !errors.Is(err, route.ErrNotLeader):
		// Fail-open is for an engine that cannot decide, never for a
		// replica that cannot reach the one that decides (docs/replicas.md).
		// That one is refused, retryable, below.
		return ch.failOpen(ctx, a, obj, applying, err)
	case err != nil:
		ch.reports.resultAll(applying, resultUndecided)
		msg := fmt.Sprintf("quota for this update of %s %s could not be decided within %s: %v; the update was not stored, retry it", kind, a.GetName(), decideTimeout, err)
		if errors.Is(err, route.ErrNotLeader) {
			msg = fmt.Sprintf("quota for this update of %s %s cannot be decided right now (%v); nothing changed, retry in a few seconds", kind, a.GetName(), err)
		}
		return apierrors.NewTimeoutError(msg, 2)
	case res.Granted:
		ch.reports.resultAll(applying, resultGranted)
		if a.IsDryRun() {
			for _, c := range res.Changes {
				warning.AddWarning(ctx, "", fmt.Sprintf("dry run: ClaimCreationPolicy %s would change the charge of this %s from %s to %s",
					c.Policy, kind, refusal.Holding(c.Old), refusal.Holding(c.New)))
			}
		}
		return nil
	}
	for i, c := range res.Changes {
		if c.Decision != nil && c.Decision.Outcome == quota.ValidationFailed {
			ch.reports.result(applying[i].Name, resultInvalidClaim)
			return apierrors.NewInternalError(fmt.Errorf("ClaimCreationPolicy %s renders a claim for this %s that the registrations refuse: %s; fix the policy or the ResourceRegistration (this is not a quota denial)",
				c.Policy, kind, c.Decision.Message))
		}
	}
	ch.reports.resultAll(applying, resultDenied)
	msg := refusal.Update(kind, a.GetName(), res, ch.increaseLink)
	ch.reports.denied(applying, msg)
	var refused []*inforce.Policy
	var claims []*quotav1alpha1.ResourceClaim
	for i, ch := range changes {
		if ch.Claim != nil {
			refused, claims = append(refused, applying[i]), append(claims, ch.Claim)
		}
	}
	ch.recordRefusal(a, refused, claims, msg)
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), errors.New(msg))
}

// updatedObjects returns the object charged and its content before and after
// the update, as the client's version sees it. Through the scale subresource
// the request carries Scales: the object is read and the new replica count
// put where its scale subresource keeps it, so policies compute from the
// object as the scale leaves it. nil without error when nothing is charged.
func (ch *Charger) updatedObjects(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) (target, map[string]any, map[string]any, error) {
	if a.GetSubresource() == "scale" {
		return ch.scaledObjects(ctx, a)
	}
	tg := target{kind: a.GetKind(), resource: a.GetResource()}
	if a.GetOldObject() == nil {
		return tg, nil, nil, nil
	}
	versioned, err := admission.NewVersionedAttributes(a, a.GetKind(), o)
	if err != nil {
		return tg, nil, nil, apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", tg.kind.Kind, err))
	}
	newObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned.VersionedObject)
	if err != nil {
		return tg, nil, nil, apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", tg.kind.Kind, err))
	}
	oldObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned.VersionedOldObject)
	if err != nil {
		return tg, nil, nil, apierrors.NewInternalError(fmt.Errorf("reading the %s for quota: %w", tg.kind.Kind, err))
	}
	return tg, oldObj, newObj, nil
}

// builtinScales are the built-in kinds with a scale subresource; their
// replicas are at spec.replicas.
var builtinScales = map[schema.GroupResource]string{
	{Group: "apps", Resource: "deployments"}:        "Deployment",
	{Group: "apps", Resource: "replicasets"}:        "ReplicaSet",
	{Group: "apps", Resource: "statefulsets"}:       "StatefulSet",
	{Group: "", Resource: "replicationcontrollers"}: "ReplicationController",
}

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// scaledObjects reads the object a scale update changes and applies the new
// replica count to it.
func (ch *Charger) scaledObjects(ctx context.Context, a admission.Attributes) (target, map[string]any, map[string]any, error) {
	gvr := a.GetResource()
	tg := target{resource: gvr}
	var crd *unstructured.Unstructured // none for the built-in kinds
	if kind, ok := builtinScales[gvr.GroupResource()]; ok {
		tg.kind = gvr.GroupVersion().WithKind(kind)
	} else {
		c, err := ch.policies.Dynamic.Resource(crdsGVR).Get(ctx, kinds.CRDName(gvr.GroupResource()), metav1.GetOptions{})
		if err != nil {
			return tg, nil, nil, apierrors.NewInternalError(fmt.Errorf("reading the definition of %s to charge its scale: %w", gvr.GroupResource(), err))
		}
		k, _, _ := unstructured.NestedString(c.Object, "spec", "names", "kind")
		tg.kind = gvr.GroupVersion().WithKind(k)
		crd = c
	}
	path := kinds.ScaleReplicasPath(crd, gvr.Version)
	if ch.policiesFor(tg.kind) == 0 {
		return tg, nil, nil, nil // nothing charges this kind: no read
	}
	newScale, ok := a.GetObject().(*unstructured.Unstructured)
	var replicas int64
	var found bool
	if ok {
		replicas, found, _ = unstructured.NestedInt64(newScale.Object, "spec", "replicas")
	} else if s, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a.GetObject()); err == nil {
		replicas, found, _ = unstructured.NestedInt64(s, "spec", "replicas")
	}
	if !found {
		return tg, nil, nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	current, err := ch.policies.Dynamic.Resource(gvr).Namespace(a.GetNamespace()).Get(rctx, a.GetName(), metav1.GetOptions{})
	if err != nil {
		return tg, nil, nil, apierrors.NewInternalError(fmt.Errorf("reading %s %s to charge its scale: %w", tg.kind.Kind, a.GetName(), err))
	}
	scaled := current.DeepCopy()
	if err := unstructured.SetNestedField(scaled.Object, replicas, path...); err != nil {
		return tg, nil, nil, apierrors.NewInternalError(fmt.Errorf("setting the replicas of %s %s to charge its scale: %w", tg.kind.Kind, a.GetName(), err))
	}
	return tg, current.Object, scaled.Object, nil
}

// policiesFor counts the policies in force for a kind.
func (ch *Charger) policiesFor(kind schema.GroupVersionKind) int {
	list, err := ch.policies.InForce(kind.Group, kind.Kind)
	if err != nil {
		return 1 // decided (and answered) by the caller
	}
	return len(list)
}
