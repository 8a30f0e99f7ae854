package grantpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// collisionRetry is how long a grant whose name is held by another grant
// waits before it is tried again (the other grant may be deleted; that
// delete is not watched, since only the engine's own grants are).
const collisionRetry = 30 * time.Second

// desiredGrant is the grant one policy wants for one trigger object.
type desiredGrant struct {
	name, generateName, namespace string
	labels, annotations           map[string]string
	spec                          quotav1alpha1.ResourceGrantSpec
}

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

	var want *desiredGrant
	if trigger != nil {
		var p *problem
		want, p = c.render(st, trigger)
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

	// The target namespace must exist: the grant is made there or nowhere.
	if msg := c.namespaceProblem(want.namespace); msg != "" {
		c.waitFor(k, want.namespace)
		c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonWaitingForNamespace,
			message: fmt.Sprintf("waiting for namespace %s: the grant for %s %s is made there once it exists (%s)", want.namespace, st.gvk.Kind, objectName(k), msg)})
		return errRetry
	}
	c.waitFor(k, "")

	// The grant to keep is the one where the template says; any other
	// grant made for this object (a renamed template, a duplicate) goes
	// first, so that the quota is never granted twice.
	keep, stale := pick(existing, want)
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
	if equality.Semantic.DeepEqual(keep.Spec, want.spec) && mapsEqual(keep.Labels, want.labels) && mapsEqual(keep.Annotations, want.annotations) {
		return nil
	}
	updated := keep.DeepCopy()
	updated.Spec, updated.Labels, updated.Annotations = want.spec, want.labels, want.annotations
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

func (c *controller) createGrant(ctx context.Context, st *activePolicy, k key, want *desiredGrant, ref *corev1.ObjectReference) error {
	g := &quotav1alpha1.ResourceGrant{
		ObjectMeta: metav1.ObjectMeta{Name: want.name, GenerateName: want.generateName, Namespace: want.namespace,
			Labels: want.labels, Annotations: want.annotations},
		Spec: want.spec,
	}
	if want.name == "" {
		// A generated name cannot be refused as a duplicate: look for the
		// grant by its labels in the API server itself before creating.
		list := &quotav1alpha1.ResourceGrantList{}
		sel := client.MatchingLabels(ownLabels(k.policy, st.gvk.Kind, k.namespace, k.name))
		if err := c.client.List(ctx, list, client.InNamespace(want.namespace), sel); err != nil {
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
		if gerr := c.client.Get(ctx, client.ObjectKey{Namespace: want.namespace, Name: want.name}, held); gerr != nil {
			return gerr
		}
		if hk, ok := grantKey(held); ok && hk == k && held.Labels[LabelPolicy] == labelValue(k.policy) {
			c.queue.AddAfter(k, 100*time.Millisecond) // ours; the cache has not seen it yet
			return nil
		}
		c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonNameCollision,
			message: fmt.Sprintf("ResourceGrant %s/%s, rendered for %s %s, exists and was not made by this policy for that object; it is left alone: rename it, or change the template's name",
				want.namespace, want.name, st.gvk.Kind, objectName(k))})
		c.recorder.Eventf(ref, corev1.EventTypeWarning, "GrantNameCollision", "ResourceGrant %s/%s of GrantCreationPolicy %s is not created: that name is held by a grant the policy did not make for this object", want.namespace, want.name, k.policy)
		c.queue.AddAfter(k, collisionRetry)
		return nil
	case apierrors.IsInvalid(err):
		c.refused(k, st, want, err)
		return nil
	case apierrors.IsNotFound(err):
		// The namespace went away between the check and the create.
		c.waitFor(k, want.namespace)
		c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonWaitingForNamespace,
			message: fmt.Sprintf("waiting for namespace %s: the grant for %s %s is made there once it exists", want.namespace, st.gvk.Kind, objectName(k))})
		return errRetry
	case err != nil:
		return fmt.Errorf("creating ResourceGrant %s/%s%s: %w", want.namespace, want.name, want.generateName, err)
	}
	c.setPending(k, nil)
	c.recorder.Eventf(ref, corev1.EventTypeNormal, "GrantCreated", "Created ResourceGrant %s/%s of GrantCreationPolicy %s", g.Namespace, g.Name, k.policy)
	klog.FromContext(ctx).V(2).Info("Created grant", "policy", k.policy, "grant", klog.KObj(g))
	return nil
}

// refused reports a rendered grant the API server refuses as invalid (a
// label value it does not accept, for example); it is tried again later,
// and at once when the object or the policy changes.
func (c *controller) refused(k key, st *activePolicy, want *desiredGrant, err error) {
	c.setPending(k, &problem{reason: quotav1alpha1.GrantPolicyReasonRenderFailed,
		message: fmt.Sprintf("%s %s: the API server refuses the rendered ResourceGrant %s/%s%s: %v", st.gvk.Kind, objectName(k), want.namespace, want.name, want.generateName, err)})
	c.queue.AddAfter(k, collisionRetry)
}

// render evaluates the policy on the trigger object: nil when the
// constraints do not hold, or the problem that stopped it.
func (c *controller) render(st *activePolicy, trigger *unstructured.Unstructured) (*desiredGrant, *problem) {
	k := key{policy: st.name, namespace: trigger.GetNamespace(), name: trigger.GetName()}
	fail := func(err error) *problem {
		return &problem{reason: quotav1alpha1.GrantPolicyReasonRenderFailed, message: fmt.Sprintf("%s %s: %v", st.gvk.Kind, objectName(k), err)}
	}
	if st.gvk.GroupKind() == quotav1alpha1.SchemeGroupVersion.WithKind("ResourceGrant").GroupKind() && trigger.GetLabels()[LabelPolicy] != "" {
		// A grant made by a policy never triggers one: a policy on
		// ResourceGrants would otherwise feed on its own grants.
		return nil, nil
	}
	ok, err := st.compiled.Applies(trigger.Object)
	if err != nil {
		return nil, fail(err)
	}
	if !ok {
		return nil, nil
	}
	r, err := st.compiled.Render(trigger.Object)
	if err != nil {
		return nil, fail(err)
	}
	want := &desiredGrant{name: r.Name, generateName: r.GenerateName, namespace: r.Namespace, spec: r.Spec}
	if want.namespace == "" {
		// No namespace in the template: the trigger's own, or the system
		// namespace for a cluster-scoped trigger.
		want.namespace = trigger.GetNamespace()
		if want.namespace == "" {
			want.namespace = c.opts.SystemNamespace
		}
	}
	if want.name == "" && want.generateName == "" {
		want.name = defaultGrantName(k)
	}
	if msgs := validation.IsDNS1123Label(want.namespace); len(msgs) > 0 {
		return nil, fail(fmt.Errorf("metadata.namespace rendered %q, not a namespace name: %s", want.namespace, strings.Join(msgs, "; ")))
	}
	if want.name != "" {
		if msgs := validation.IsDNS1123Subdomain(want.name); len(msgs) > 0 {
			return nil, fail(fmt.Errorf("metadata.name rendered %q, not a valid name: %s", want.name, strings.Join(msgs, "; ")))
		}
		want.generateName = ""
	}
	want.labels = merge(r.Labels, ownLabels(st.name, st.gvk.Kind, k.namespace, k.name))
	want.annotations = merge(r.Annotations, ownAnnotations(st.name, k.namespace, k.name, string(trigger.GetUID())))
	return want, nil
}

// defaultGrantName names the grant of a template without a name: the
// policy's name and a hash of the object's, stable across restarts so
// that a create is refused rather than doubled.
func defaultGrantName(k key) string {
	sum := sha256.Sum256([]byte(k.policy + "\x00" + k.namespace + "\x00" + k.name))
	prefix := k.policy
	if len(prefix) > 200 {
		prefix = strings.TrimRight(prefix[:200], "-.")
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:10]
}

// existingGrants are the grants this policy made for the object, found by
// their labels.
func (c *controller) existingGrants(st *activePolicy, k key) []*quotav1alpha1.ResourceGrant {
	objs, _ := c.grants.GetIndexer().ByIndex(indexTrigger, triggerIndexValue(k.policy, k.namespace, k.name))
	out := make([]*quotav1alpha1.ResourceGrant, 0, len(objs))
	for _, o := range objs {
		g := o.(*quotav1alpha1.ResourceGrant)
		if owner := g.Annotations[AnnotationPolicy]; owner != "" && owner != k.policy {
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

// pick splits the existing grants into the one matching where the
// template puts the grant (the oldest, for a generated name) and the rest.
func pick(existing []*quotav1alpha1.ResourceGrant, want *desiredGrant) (keep *quotav1alpha1.ResourceGrant, stale []*quotav1alpha1.ResourceGrant) {
	for _, g := range existing {
		match := g.Namespace == want.namespace && g.DeletionTimestamp == nil
		if want.name != "" {
			match = match && g.Name == want.name
		} else {
			match = match && strings.HasPrefix(g.Name, want.generateName)
		}
		if match && keep == nil {
			keep = g
			continue
		}
		stale = append(stale, g)
	}
	return keep, stale
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

func merge(rendered, own map[string]string) map[string]string {
	out := make(map[string]string, len(rendered)+len(own))
	for k, v := range rendered {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out
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
