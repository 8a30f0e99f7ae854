package grantpolicy

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/grantpolicy/render"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// collisionRetry is how long a grant whose name is held by another grant
// waits before it is tried again (the other grant may be deleted; that
// delete is not watched, since only the engine's own grants are).
const collisionRetry = 30 * time.Second

// syncTrigger makes the grants of one policy for one trigger object what
// the policy renders from the object now: one grant when the object exists
// and the constraints hold, none otherwise. A policy that is not Ready or
// is disabled is not acted on: its grants stay as they are.
func (c *controller) syncTrigger(ctx context.Context, k key) error {
	c.mu.Lock()
	st := c.active[k.policy]
	c.mu.Unlock()
	if st == nil {
		return nil
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	if !st.live {
		return nil
	}
	if !st.informer.HasSynced() {
		// An object missing from a watch that has not listed yet may
		// exist: judging now could delete its grant.
		return errRetry
	}
	logger := klog.FromContext(ctx).WithValues("policy", k.policy, "trigger", klog.KRef(k.namespace, k.name))

	var trigger *unstructured.Unstructured
	obj, exists, err := st.informer.GetStore().GetByKey(cacheKey(k))
	if err != nil {
		return err
	}
	if exists {
		trigger = obj.(*unstructured.Unstructured)
		if trigger.GetDeletionTimestamp() != nil {
			trigger = nil // being deleted: its grants go now
		}
	}
	existing := c.existingGrants(st, k)

	var want *render.Grant
	if trigger != nil {
		var p *problem
		want, p = c.renderGrant(st, trigger)
		if p != nil {
			// The object's grants are left as they are: a failing
			// expression says nothing about whether they should exist.
			c.waitFor(k, "")
			c.setPending(k, p)
			return nil
		}
	}
	if want == nil {
		c.waitFor(k, "")
		c.setPending(k, nil)
		for _, g := range existing {
			if err := c.deleteGrant(ctx, g); err != nil {
				return err
			}
			why := "the trigger object is gone"
			if trigger != nil {
				why = "its constraints no longer hold"
			}
			c.recordOnTrigger(st.gvk.GroupVersion().String(), g, corev1.EventTypeNormal, "GrantDeleted",
				fmt.Sprintf("Deleted ResourceGrant %s/%s of GrantCreationPolicy %s: %s", g.Namespace, g.Name, k.policy, why))
			logger.V(2).Info("Deleted grant", "grant", klog.KObj(g), "reason", why)
		}
		return nil
	}

	// A parent context puts the grant into the parent's control plane (its
	// quota namespace at the root), or nowhere while it cannot be resolved.
	if st.parentKind != "" {
		ns, why := c.parentNamespace(ctx, st, trigger)
		if why != "" {
			ref := triggerRef(st, trigger)
			c.recorder.Event(ref, corev1.EventTypeWarning, quotav1alpha1.GrantPolicyReasonParentContextNotFound, why)
			c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonParentContextNotFound, message: why})
			c.queue.AddAfter(k, parentRetry)
			return nil
		}
		want.Namespace = ns
	}
	// The target namespace must exist: the grant is made there or nowhere.
	if msg := c.namespaceProblem(want.Namespace); msg != "" {
		c.waitFor(k, want.Namespace)
		c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonWaitingForNamespace,
			message: fmt.Sprintf("waiting for namespace %s: the grant for %s %s is made there once it exists (%s)", want.Namespace, st.gvk.Kind, objectName(k), msg)})
		return errRetry
	}
	c.waitFor(k, "")

	// The grant to keep is the one where the template says; any other
	// grant made for this object (a renamed template, a duplicate) goes
	// first, so that the quota is never granted twice.
	keep, stale := render.Pick(existing, want)
	for _, g := range stale {
		if err := c.deleteGrant(ctx, g); err != nil {
			return err
		}
		c.recordOnTrigger(st.gvk.GroupVersion().String(), g, corev1.EventTypeNormal, "GrantDeleted",
			fmt.Sprintf("Deleted ResourceGrant %s/%s of GrantCreationPolicy %s: the policy now renders another grant for this object", g.Namespace, g.Name, k.policy))
	}
	ref := triggerRef(st, trigger)
	if keep == nil {
		return c.createGrant(ctx, st, k, want, ref)
	}
	c.setPending(k, nil)
	owners := withTriggerOwner(keep.OwnerReferences, ref, keep.Namespace)
	if equality.Semantic.DeepEqual(keep.Spec, want.Spec) && mapsEqual(keep.Labels, want.Labels) && mapsEqual(keep.Annotations, want.Annotations) &&
		equality.Semantic.DeepEqual(keep.OwnerReferences, owners) {
		return nil
	}
	updated := keep.DeepCopy()
	updated.Spec, updated.Labels, updated.Annotations, updated.OwnerReferences = want.Spec, want.Labels, want.Annotations, owners
	err = c.client.Update(ctx, updated)
	grantWrites.WithLabelValues("update", result(err)).Inc()
	if apierrors.IsInvalid(err) {
		c.refused(k, st, want, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating ResourceGrant %s/%s: %w", keep.Namespace, keep.Name, err)
	}
	c.recorder.Eventf(ref, corev1.EventTypeNormal, "GrantUpdated", "Updated ResourceGrant %s/%s of GrantCreationPolicy %s", updated.Namespace, updated.Name, k.policy)
	logger.V(2).Info("Updated grant", "grant", klog.KObj(updated))
	return nil
}

func (c *controller) createGrant(ctx context.Context, st *activePolicy, k key, want *render.Grant, ref *corev1.ObjectReference) error {
	g := &quotav1alpha1.ResourceGrant{
		ObjectMeta: metav1.ObjectMeta{Name: want.Name, GenerateName: want.GenerateName, Namespace: want.Namespace,
			Labels: want.Labels, Annotations: want.Annotations, OwnerReferences: withTriggerOwner(nil, ref, want.Namespace)},
		Spec: want.Spec,
	}
	if want.Name == "" {
		// A generated name cannot be refused as a duplicate: look for the
		// grant by its labels in the API server itself before creating.
		list := &quotav1alpha1.ResourceGrantList{}
		sel := client.MatchingLabels(render.OwnLabels(k.policy, st.gvk.Kind, k.namespace, k.name))
		if err := c.client.List(ctx, list, client.InNamespace(want.Namespace), sel); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			c.queue.AddAfter(k, 100*time.Millisecond) // the cache has not seen it yet
			return nil
		}
	}
	err := c.client.Create(ctx, g)
	grantWrites.WithLabelValues("create", result(err)).Inc()
	switch {
	case apierrors.IsAlreadyExists(err):
		held := &quotav1alpha1.ResourceGrant{}
		if gerr := c.client.Get(ctx, client.ObjectKey{Namespace: want.Namespace, Name: want.Name}, held); gerr != nil {
			return gerr
		}
		if hk, ok := grantKey(held); ok && hk == k && held.Labels[quotav1alpha1.GrantPolicyLabel] == render.LabelValue(k.policy) {
			c.queue.AddAfter(k, 100*time.Millisecond) // ours; the cache has not seen it yet
			return nil
		}
		c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonNameCollision,
			message: fmt.Sprintf("ResourceGrant %s/%s, rendered for %s %s, exists and was not made by this policy for that object; it is left alone: rename it, or change the template's name",
				want.Namespace, want.Name, st.gvk.Kind, objectName(k))})
		c.recorder.Eventf(ref, corev1.EventTypeWarning, "GrantNameCollision", "ResourceGrant %s/%s of GrantCreationPolicy %s is not created: that name is held by a grant the policy did not make for this object", want.Namespace, want.Name, k.policy)
		c.queue.AddAfter(k, collisionRetry)
		return nil
	case apierrors.IsInvalid(err):
		c.refused(k, st, want, err)
		return nil
	case apierrors.IsNotFound(err):
		// The namespace went away between the check and the create.
		c.waitFor(k, want.Namespace)
		c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonWaitingForNamespace,
			message: fmt.Sprintf("waiting for namespace %s: the grant for %s %s is made there once it exists", want.Namespace, st.gvk.Kind, objectName(k))})
		return errRetry
	case err != nil:
		return fmt.Errorf("creating ResourceGrant %s/%s%s: %w", want.Namespace, want.Name, want.GenerateName, err)
	}
	c.setPending(k, nil)
	c.recorder.Eventf(ref, corev1.EventTypeNormal, "GrantCreated", "Created ResourceGrant %s/%s of GrantCreationPolicy %s", g.Namespace, g.Name, k.policy)
	klog.FromContext(ctx).V(2).Info("Created grant", "policy", k.policy, "grant", klog.KObj(g))
	return nil
}

// refused reports a rendered grant the API server refuses as invalid (a
// label value it does not accept, for example); it is tried again later,
// and at once when the object or the policy changes.
func (c *controller) refused(k key, st *activePolicy, want *render.Grant, err error) {
	c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonRenderFailed,
		message: fmt.Sprintf("%s %s: the API server refuses the rendered ResourceGrant %s/%s%s: %v", st.gvk.Kind, objectName(k), want.Namespace, want.Name, want.GenerateName, err)})
	c.queue.AddAfter(k, collisionRetry)
}

// parentRetry is how often a grant whose parent context cannot be resolved
// is tried again.
const parentRetry = 2 * time.Second

// parentNamespace resolves the trigger's parent context to the namespace at
// the root that its control plane's quota objects are kept in; why says
// what is missing when it cannot be resolved.
func (c *controller) parentNamespace(ctx context.Context, st *activePolicy, trigger *unstructured.Unstructured) (ns, why string) {
	k := key{policy: st.name, namespace: trigger.GetNamespace(), name: trigger.GetName()}
	name, _, err := st.compiled.ParentName(trigger.Object)
	if err != nil {
		return "", fmt.Sprintf("%s %s: spec.target.parentContext.nameExpression failed: %v", st.gvk.Kind, objectName(k), err)
	}
	var plane planes.Plane
	var owner client.Object
	switch st.parentKind {
	case "Project":
		plane, owner = planes.Plane{Kind: planes.Projects, Name: name}, &rmv1alpha1.Project{}
	case "Organization":
		plane, owner = planes.Plane{Kind: planes.Organizations, Name: name}, &rmv1alpha1.Organization{}
	default:
		return "", fmt.Sprintf("%s %s: parent context kind %q has no control plane: use Project or Organization", st.gvk.Kind, objectName(k), st.parentKind)
	}
	if name == "" {
		return "", fmt.Sprintf("%s %s: spec.target.parentContext.nameExpression rendered an empty name", st.gvk.Kind, objectName(k))
	}
	err = c.client.Get(ctx, client.ObjectKey{Name: name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Sprintf("%s %s: its parent context %s %s does not exist; the grant is written into its control plane once it does", st.gvk.Kind, objectName(k), st.parentKind, name)
	case err != nil:
		return "", fmt.Sprintf("%s %s: reading its parent context %s %s: %v", st.gvk.Kind, objectName(k), st.parentKind, name, err)
	case owner.GetDeletionTimestamp() != nil:
		return "", fmt.Sprintf("%s %s: its parent context %s %s is being deleted", st.gvk.Kind, objectName(k), st.parentKind, name)
	}
	return plane.QuotaNamespace(), ""
}

// renderGrant evaluates the policy on the trigger object: nil when the
// constraints do not hold, or the problem that stopped it.
func (c *controller) renderGrant(st *activePolicy, trigger *unstructured.Unstructured) (*render.Grant, *problem) {
	want, err := render.ForTrigger(st.name, st.gvk, st.compiled, c.opts.SystemNamespace, trigger)
	if err != nil {
		k := key{policy: st.name, namespace: trigger.GetNamespace(), name: trigger.GetName()}
		return nil, &problem{reason: quotav1alpha1.GrantPolicyReasonRenderFailed, message: fmt.Sprintf("%s %s: %v", st.gvk.Kind, objectName(k), err)}
	}
	return want, nil
}

// existingGrants are the grants this policy made for the object, found by
// their labels.
func (c *controller) existingGrants(st *activePolicy, k key) []*quotav1alpha1.ResourceGrant {
	objs, _ := c.grants.GetIndexer().ByIndex(indexTrigger, render.TriggerIndexValue(k.policy, k.namespace, k.name))
	out := make([]*quotav1alpha1.ResourceGrant, 0, len(objs))
	for _, o := range objs {
		g := o.(*quotav1alpha1.ResourceGrant)
		if owner := g.Annotations[quotav1alpha1.GrantPolicyAnnotation]; owner != "" && owner != k.policy {
			continue
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreationTimestamp.Equal(&out[j].CreationTimestamp) {
			return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// namespaceProblem says why a grant cannot be made in ns now, or "".
func (c *controller) namespaceProblem(ns string) string {
	obj, exists, err := c.namespaces.GetStore().GetByKey(ns)
	switch {
	case err != nil:
		return err.Error()
	case !exists:
		return "it does not exist"
	case obj.(*corev1.Namespace).Status.Phase == corev1.NamespaceTerminating:
		return "it is being deleted"
	}
	return ""
}

func triggerRef(st *activePolicy, u *unstructured.Unstructured) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: st.gvk.GroupVersion().String(), Kind: st.gvk.Kind,
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: types.UID(u.GetUID()), ResourceVersion: u.GetResourceVersion()}
}

// withTriggerOwner is owners with the trigger object as the controller
// owner of a grant in namespace ns, as the reference implementation sets
// it, when an ownerReference can name it (a cluster-scoped trigger, or one
// in the grant's namespace). blockOwnerDeletion stays false: the grant
// engine needs no finalizer rights on trigger kinds, and the policy's own
// cleanup deletes the grants of a deleted trigger.
func withTriggerOwner(owners []metav1.OwnerReference, ref *corev1.ObjectReference, ns string) []metav1.OwnerReference {
	if ref.Namespace != "" && ref.Namespace != ns {
		return owners
	}
	want := metav1.OwnerReference{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}
	out := make([]metav1.OwnerReference, 0, len(owners)+1)
	for _, o := range owners {
		if o.UID == want.UID || (o.Controller != nil && *o.Controller) {
			continue // at most one controller: the trigger
		}
		out = append(out, o)
	}
	return append(out, want)
}

func cacheKey(k key) string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

func objectName(k key) string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
