package grantpolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/grantpolicy/policystatus"
	"github.com/quotaplane/quotaplane/internal/grantpolicy/render"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// activePolicy is a Ready, enabled policy generation the engine acts on.
// Trigger reconciles hold mu for reading while they write; deactivating
// takes it for writing, so that once a policy is deactivated no write for
// it is in flight or will start.
type activePolicy struct {
	name       string
	uid        types.UID
	generation int64
	compiled   *policy.CompiledGrant
	gvk        schema.GroupVersionKind
	gvr        schema.GroupVersionResource
	namespaced bool
	informer   cache.SharedIndexInformer
	// parentKind is spec.target.parentContext.kind, "" without one.
	parentKind string

	mu   sync.RWMutex
	live bool
}

func (a *activePolicy) same(b *activePolicy) bool {
	return a.uid == b.uid && a.generation == b.generation && a.gvr == b.gvr && a.namespaced == b.namespaced
}

// problem is what holds one grant back.
type problem struct{ reason, message string }

func (c *controller) syncPolicy(ctx context.Context, name string) error {
	obj, exists, err := c.policies.GetStore().GetByKey(name)
	if err != nil {
		return err
	}
	if !exists {
		// Deleted without the finalizer having run (it was removed by
		// hand): the grants are found by label all the same.
		c.deactivate(name)
		c.forget(name)
		return c.deleteAllGrants(ctx, name, nil)
	}
	p := obj.(*quotav1alpha1.GrantCreationPolicy)
	if p.DeletionTimestamp != nil {
		c.deactivate(name)
		if err := c.deleteAllGrants(ctx, name, p); err != nil {
			return err
		}
		c.forget(name)
		if !controllerutil.ContainsFinalizer(p, quotav1alpha1.GrantPolicyFinalizer) {
			return nil
		}
		updated := p.DeepCopy()
		controllerutil.RemoveFinalizer(updated, quotav1alpha1.GrantPolicyFinalizer)
		err := c.client.Patch(ctx, updated, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !controllerutil.ContainsFinalizer(p, quotav1alpha1.GrantPolicyFinalizer) {
		updated := p.DeepCopy()
		controllerutil.AddFinalizer(updated, quotav1alpha1.GrantPolicyFinalizer)
		if err := c.client.Patch(ctx, updated, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("adding the finalizer to GrantCreationPolicy %s: %w", name, err)
		}
		p = updated
	}

	ready, st, retry := c.evaluate(p)
	if st != nil {
		c.activate(ctx, st)
	} else {
		c.deactivate(name)
	}
	synced := c.syncedCondition(p, st != nil)
	c.mu.Lock()
	c.reasons[name] = ready.Reason
	c.updatePolicyMetric()
	c.mu.Unlock()
	if retry > 0 {
		c.queue.AddAfter(policyKey(name), retry)
	}
	var warnings []policy.Warning
	if st != nil {
		warnings = st.compiled.Warnings
	}
	return c.writePolicyStatus(ctx, p, ready, synced, warnings)
}

// evaluate judges a policy: its Ready condition, and the generation to act
// on when it is Ready. retry is set when the policy waits for its trigger
// kind to be served.
func (c *controller) evaluate(p *quotav1alpha1.GrantCreationPolicy) (metav1.Condition, *activePolicy, time.Duration) {
	res := p.Spec.Trigger.Resource
	ready := metav1.Condition{Type: quotav1alpha1.PolicyConditionReady, Status: metav1.ConditionTrue, Reason: policy.ReasonReady,
		ObservedGeneration: p.Generation, Message: quota.PolicyReadyMessage}
	invalid := func(msg string) (metav1.Condition, *activePolicy, time.Duration) {
		ready.Status, ready.Reason = metav1.ConditionFalse, policy.ReasonValidationFailed
		ready.Message = msg + "; the grants this policy made are kept, and none is made until this is fixed"
		return ready, nil, 0
	}
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil {
		return invalid(fmt.Sprintf("spec.trigger.resource.apiVersion: %v", err))
	}
	gvk := gv.WithKind(res.Kind)
	// The kind's schema types `trigger`, so that the cost of each
	// expression is estimated; a kind not served yet is judged without.
	mapping, mapErr := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	var triggerSchema *spec.Schema
	if mapErr == nil {
		var schemaErr error
		if triggerSchema, schemaErr = c.schemas.Resolve(res.APIVersion, res.Kind); schemaErr != nil {
			// A kind just served may not be in the OpenAPI documents yet:
			// wait a little for its schema, then judge without it (its
			// expressions' cost is then limited at evaluation only).
			// A generation already acted on is not held back by a schema
			// that cannot be read for a moment.
			triggerSchema = nil
			c.mu.Lock()
			waited := c.schemaAttempts[p.Name]
			c.schemaAttempts[p.Name] = waited + 1
			current := c.active[p.Name]
			c.mu.Unlock()
			acting := current != nil && current.uid == p.UID && current.generation == p.Generation
			if waited < schemaWaits && !acting && !p.Spec.Disabled {
				ready.Status, ready.Reason = metav1.ConditionFalse, policy.ReasonValidationFailed
				ready.Message = fmt.Sprintf("spec.trigger.resource: waiting for the schema of kind %s (apiVersion %s), to estimate the cost of the expressions: %v",
					res.Kind, res.APIVersion, schemaErr)
				return ready, nil, c.kindRetry(p.Name)
			}
			klog.Background().V(2).Info("Judging a GrantCreationPolicy without its trigger's schema", "policy", p.Name, "err", schemaErr)
		}
	}
	compiled, err := policy.CompileGrant(p, policy.Options{TriggerSchema: triggerSchema})
	if err != nil {
		return invalid(err.Error())
	}
	if p.Spec.Disabled {
		ready.Status, ready.Reason = metav1.ConditionFalse, policy.ReasonDisabled
		ready.Message = "spec.disabled is true: the grants this policy made are kept, and none is made, changed or removed until it is enabled"
		return ready, nil, 0
	}
	registered := c.activeResourceTypes()
	consumer := p.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef
	for _, rt := range compiled.LiteralResourceTypes {
		ct, ok := registered[rt]
		if !ok {
			return invalid(fmt.Sprintf("%s: resource type %s is not registered (no Active ResourceRegistration names it); create its ResourceRegistration and the policy becomes Ready",
				allowanceField(p, rt), rt))
		}
		if ct.APIGroup != consumer.APIGroup || ct.Kind != consumer.Kind {
			return invalid(fmt.Sprintf("spec.target.resourceGrantTemplate.spec.consumerRef: resource type %s is given to consumers of kind %s, not %s; make the consumerRef a %s, or grant another resource type",
				rt, groupKind(ct.APIGroup, ct.Kind), groupKind(consumer.APIGroup, consumer.Kind), groupKind(ct.APIGroup, ct.Kind)))
		}
	}
	if mapErr != nil {
		c.resetMapper()
		c.schemas.Invalidate(gv)
		ready.Status, ready.Reason = metav1.ConditionFalse, policy.ReasonValidationFailed
		ready.Message = fmt.Sprintf("spec.trigger.resource: waiting for kind %s (apiVersion %s), which this API server does not serve yet; it is looked for again (at least every %s), and the policy becomes Ready once it is served (for example once its CRD is installed)",
			res.Kind, res.APIVersion, c.opts.KindRetry)
		if !meta.IsNoMatchError(mapErr) {
			ready.Message += fmt.Sprintf(" (discovery: %v)", mapErr)
		}
		return ready, nil, c.kindRetry(p.Name)
	}
	c.mu.Lock()
	delete(c.kindAttempts, p.Name)
	delete(c.schemaAttempts, p.Name)
	c.mu.Unlock()
	st := &activePolicy{name: p.Name, uid: p.UID, generation: p.Generation, compiled: compiled, gvk: gvk,
		gvr: mapping.Resource, namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}
	if pc := p.Spec.Target.ParentContext; pc != nil {
		st.parentKind = pc.Kind
	}
	return ready, st, 0
}

// schemaWaits is how many times a policy whose kind is served looks for the
// kind's schema before it is judged without it (about 10s).
const schemaWaits = 7

// kindRetry is how long a policy waits before its trigger kind is looked
// for again: from 200ms, doubling, up to Options.KindRetry.
func (c *controller) kindRetry(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.kindAttempts[name]
	c.kindAttempts[name] = n + 1
	d := 200 * time.Millisecond << min(n, 10)
	return min(d, c.opts.KindRetry)
}

// allowanceField is the field path of the allowance naming rt.
func allowanceField(p *quotav1alpha1.GrantCreationPolicy, rt string) string {
	for i, a := range p.Spec.Target.ResourceGrantTemplate.Spec.Allowances {
		if string(a.ResourceType) == rt {
			return fmt.Sprintf("spec.target.resourceGrantTemplate.spec.allowances[%d].resourceType", i)
		}
	}
	return "spec.target.resourceGrantTemplate.spec.allowances"
}

// activeResourceTypes are the resource types of Active registrations, with
// the consumer type each is given to.
func (c *controller) activeResourceTypes() map[string]quotav1alpha1.ConsumerTypeRef {
	out := map[string]quotav1alpha1.ConsumerTypeRef{}
	for _, obj := range c.registrations.GetStore().List() {
		r := obj.(*quotav1alpha1.ResourceRegistration)
		if r.DeletionTimestamp == nil && meta.IsStatusConditionTrue(r.Status.Conditions, quotav1alpha1.RegistrationConditionActive) {
			out[string(r.Spec.ResourceType)] = r.Spec.ConsumerType
		}
	}
	return out
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// resetMapper forgets discovery, at most five times a second, so that a kind
// served after the policy was judged is found.
func (c *controller) resetMapper() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.lastMapperReset) < 200*time.Millisecond {
		return
	}
	c.lastMapperReset = time.Now()
	c.mapper.Reset()
}

// activate makes st the generation acted on and enqueues every object of
// its trigger kind and every grant it made.
func (c *controller) activate(ctx context.Context, st *activePolicy) {
	c.mu.Lock()
	old := c.active[st.name]
	c.mu.Unlock()
	if old != nil && old.same(st) {
		return
	}
	st.informer = c.triggers.Acquire(st.gvr, st.name)
	st.live = true
	c.mu.Lock()
	c.active[st.name] = st
	c.mu.Unlock()
	if old != nil {
		old.stop()
		if old.gvr != st.gvr {
			c.triggers.Release(old.gvr, st.name)
		}
	}
	klog.FromContext(ctx).V(2).Info("Acting on GrantCreationPolicy", "policy", st.name, "generation", st.generation, "trigger", st.gvr.String())
	// The watch's store holds every object notified before this policy
	// joined it; later ones are notified with it.
	for _, k := range st.informer.GetStore().ListKeys() {
		ns, name, err := cache.SplitMetaNamespaceKey(k)
		if err == nil {
			c.queue.Add(key{policy: st.name, namespace: ns, name: name})
		}
	}
	c.enqueueGrantsOf(st.name)
}

func (a *activePolicy) stop() {
	a.mu.Lock()
	a.live = false
	a.mu.Unlock()
}

// deactivate stops acting on a policy; it returns once no write for it is
// in flight.
func (c *controller) deactivate(name string) {
	c.mu.Lock()
	old := c.active[name]
	delete(c.active, name)
	c.dropPending(name)
	c.mu.Unlock()
	if old != nil {
		old.stop()
		c.triggers.Release(old.gvr, name)
	}
}

// forget drops what is remembered of a deleted policy.
func (c *controller) forget(name string) {
	c.mu.Lock()
	delete(c.reasons, name)
	delete(c.kindAttempts, name)
	delete(c.schemaAttempts, name)
	c.updatePolicyMetric()
	c.mu.Unlock()
}

func (c *controller) enqueueGrantsOf(policyName string) {
	objs, _ := c.grants.GetIndexer().ByIndex(indexPolicy, render.LabelValue(policyName))
	for _, obj := range objs {
		if k, ok := grantKey(obj.(*quotav1alpha1.ResourceGrant)); ok && k.policy == policyName {
			c.queue.Add(k)
		}
	}
}

// deleteAllGrants deletes every grant labelled with the policy, read from
// the API server rather than the cache, so that none is left behind.
func (c *controller) deleteAllGrants(ctx context.Context, name string, p *quotav1alpha1.GrantCreationPolicy) error {
	list := &quotav1alpha1.ResourceGrantList{}
	if err := c.client.List(ctx, list, client.MatchingLabels{quotav1alpha1.GrantPolicyLabel: render.LabelValue(name)}); err != nil {
		return fmt.Errorf("listing the grants of GrantCreationPolicy %s: %w", name, err)
	}
	var errs []error
	deleted := 0
	for i := range list.Items {
		g := &list.Items[i]
		if owner := g.Annotations[quotav1alpha1.GrantPolicyAnnotation]; owner != "" && owner != name {
			continue
		}
		if err := c.deleteGrant(ctx, g); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted++
		if p != nil {
			c.recordOnTrigger(p.Spec.Trigger.Resource.APIVersion, g, corev1.EventTypeNormal, "GrantDeleted",
				fmt.Sprintf("Deleted ResourceGrant %s/%s: GrantCreationPolicy %s is being deleted", g.Namespace, g.Name, name))
		}
	}
	if deleted > 0 && p != nil {
		c.recorder.Eventf(p, corev1.EventTypeNormal, "GrantDeleted", "Deleted %d ResourceGrants made by this policy, which is being deleted", deleted)
	}
	if deleted > 0 {
		klog.FromContext(ctx).V(2).Info("Deleted the grants of a deleted GrantCreationPolicy", "policy", name, "grants", deleted)
	}
	return errors.Join(errs...)
}

func (c *controller) deleteGrant(ctx context.Context, g *quotav1alpha1.ResourceGrant) error {
	uid := g.UID
	err := c.client.Delete(ctx, g, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	grantWrites.WithLabelValues("delete", result(err)).Inc()
	if err != nil {
		return fmt.Errorf("deleting ResourceGrant %s/%s: %w", g.Namespace, g.Name, err)
	}
	return nil
}

// recordOnTrigger records an event on the trigger object a grant was made
// for, named by the grant's labels and annotations.
func (c *controller) recordOnTrigger(apiVersion string, g *quotav1alpha1.ResourceGrant, eventType, reason, message string) {
	ref := &corev1.ObjectReference{APIVersion: apiVersion, Kind: g.Labels[quotav1alpha1.GrantPolicyLabelTriggerKind],
		Namespace: g.Annotations[quotav1alpha1.GrantPolicyAnnotationTriggerNamespace], Name: g.Annotations[quotav1alpha1.GrantPolicyAnnotationTriggerName],
		UID: types.UID(g.Annotations[quotav1alpha1.GrantPolicyAnnotationTriggerUID])}
	if ref.Name == "" {
		return
	}
	c.recorder.Event(ref, eventType, reason, message)
}

// setPending records what holds back the grant of k (nil: nothing) and
// enqueues the policy when that changes its status. A Warning event on the
// policy says so once: at once for a collision or a failed render, after
// waitGrace for a namespace (which usually appears a moment after its
// object, as an organization's does).
func (c *controller) setPending(k key, p *problem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.pending[k.policy][k]
	switch {
	case p == nil && !had:
		return
	case p == nil:
		delete(c.pending[k.policy], k)
		delete(c.heldSince, k)
	case had && old == *p:
		c.reportHeld(k, p)
		return
	default:
		if c.pending[k.policy] == nil {
			c.pending[k.policy] = map[key]problem{}
		}
		c.pending[k.policy][k] = *p
		if !had || old.reason != p.reason {
			c.heldSince[k] = heldSince{since: time.Now()}
		}
		c.reportHeld(k, p)
	}
	c.updateProblemMetric()
	// Coalesced: a burst of objects waiting for their namespaces writes
	// the policy's status a few times, not once per object.
	c.queue.AddAfter(policyKey(k.policy), statusDelay)
}

// waitGrace is how long a grant waits for its namespace before the policy
// gets a Warning event about it.
const waitGrace = 5 * time.Second

type heldSince struct {
	since    time.Time
	reported bool
}

// reportHeld records the Warning event of a held-back grant once; c.mu is
// held.
func (c *controller) reportHeld(k key, p *problem) {
	h := c.heldSince[k]
	st := c.active[k.policy]
	if h.reported || st == nil {
		return
	}
	if waited := time.Since(h.since); p.reason == quotav1alpha1.GrantPolicyReasonWaitingForNamespace && waited < waitGrace {
		c.queue.AddAfter(k, waitGrace-waited+10*time.Millisecond) // look again when the grace ends
		return
	}
	h.reported = true
	c.heldSince[k] = h
	ref := &corev1.ObjectReference{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "GrantCreationPolicy", Name: k.policy, UID: st.uid}
	c.recorder.Event(ref, corev1.EventTypeWarning, p.reason, p.message)
}

// statusDelay is how long a change of what holds grants back waits before
// the policy's status is written.
const statusDelay = 250 * time.Millisecond

// waitFor records that k waits for namespace ns (or, with ns empty, for
// nothing).
func (c *controller) waitFor(k key, ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, keys := range c.waitingFor {
		if n != ns {
			delete(keys, k)
			if len(keys) == 0 {
				delete(c.waitingFor, n)
			}
		}
	}
	if ns == "" {
		return
	}
	if c.waitingFor[ns] == nil {
		c.waitingFor[ns] = map[key]struct{}{}
	}
	c.waitingFor[ns][k] = struct{}{}
}

// dropPending forgets the problems of a policy; c.mu is held.
func (c *controller) dropPending(name string) {
	if len(c.pending[name]) == 0 {
		return
	}
	for k := range c.pending[name] {
		delete(c.heldSince, k)
		for n, keys := range c.waitingFor {
			delete(keys, k)
			if len(keys) == 0 {
				delete(c.waitingFor, n)
			}
		}
	}
	delete(c.pending, name)
	c.updateProblemMetric()
}

func (c *controller) updateProblemMetric() {
	counts := map[string]int{quotav1alpha1.GrantPolicyReasonWaitingForNamespace: 0, quotav1alpha1.GrantPolicyReasonNameCollision: 0, quotav1alpha1.GrantPolicyReasonRenderFailed: 0}
	for _, keys := range c.pending {
		for _, p := range keys {
			counts[p.reason]++
		}
	}
	for r, n := range counts {
		problems.WithLabelValues(r).Set(float64(n))
	}
}

func (c *controller) updatePolicyMetric() {
	counts := map[string]int{policy.ReasonReady: 0, policy.ReasonValidationFailed: 0, policy.ReasonDisabled: 0}
	for _, r := range c.reasons {
		counts[r]++
	}
	for r, n := range counts {
		policiesByReason.WithLabelValues(r).Set(float64(n))
	}
}

// held are the problems holding back the grants of policy name.
func (c *controller) held(name string) []policystatus.Problem {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := make([]policystatus.Problem, 0, len(c.pending[name]))
	for _, pr := range c.pending[name] {
		held = append(held, policystatus.Problem{Reason: pr.reason, Message: pr.message})
	}
	return held
}

func (c *controller) syncedCondition(p *quotav1alpha1.GrantCreationPolicy, active bool) metav1.Condition {
	return policystatus.Synced(p, active, c.held(p.Name))
}

func (c *controller) writePolicyStatus(ctx context.Context, p *quotav1alpha1.GrantCreationPolicy, ready, synced metav1.Condition, warnings []policy.Warning) error {
	return policystatus.Write(ctx, c.client.Status(), c.recorder, p, ready, synced, policystatus.Parent(p, c.held(p.Name)), warnings)
}
