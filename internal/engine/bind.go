package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

const (
	// bindDelay is how long after admission the binder first looks for the
	// object: by then it is normally stored.
	bindDelay = 200 * time.Millisecond
	// bindGrace is how long a claim made by admission may wait for its
	// object: an object not stored by then (a later admission step refused
	// it, or the request died) never will be, and the claim is deleted,
	// releasing its quota.
	bindGrace = 5 * time.Second
)

// bindWorker binds claims made by admission to their objects: once the
// object is stored, it owns the claim (deleting it releases the quota); if it
// is never stored, the claim is deleted.
func (t *term) bindWorker(ctx context.Context) {
	for {
		uid, shutdown := t.binds.Get()
		if shutdown {
			return
		}
		retry, err := t.bind(ctx, uid)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				klog.FromContext(ctx).V(2).Info("Binding a claim to its object failed; retrying", "uid", uid, "err", err)
			}
			t.binds.AddRateLimited(uid)
		case retry > 0:
			t.binds.AddAfter(uid, retry)
		default:
			t.binds.Forget(uid)
		}
		t.binds.Done(uid)
	}
}

func (t *term) bind(ctx context.Context, uid string) (time.Duration, error) {
	t.mu.Lock()
	k := t.claimKeys[uid]
	t.mu.Unlock()
	obj, exists, err := t.claimInformer.GetStore().GetByKey(k)
	if err != nil || !exists {
		// Not in the cache yet: admission created it moments ago.
		if _, known := t.claimKeysGet(uid); known {
			return 100 * time.Millisecond, err
		}
		return 0, err
	}
	c := obj.(*quotav1alpha1.ResourceClaim)
	if string(c.UID) != uid || c.Labels[LabelBinding] != bindingPending {
		return 0, nil
	}
	gvr, ok := parseGVR(c.Annotations[AnnotationResource])
	ref := c.Spec.ResourceRef
	if !ok || ref == nil {
		return 0, t.dropUnbound(ctx, c, "it names no resource")
	}
	owner, err := t.r.metadata.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case err == nil && string(owner.UID) == c.Annotations[AnnotationResourceUID]:
		return 0, t.bindTo(ctx, c, owner.APIVersion, owner.Kind, owner.Name, owner.UID)
	case err == nil || apierrors.IsNotFound(err):
		if time.Since(c.CreationTimestamp.Time) < bindGrace {
			return 250 * time.Millisecond, nil
		}
		return 0, t.dropUnbound(ctx, c, fmt.Sprintf("%s %s was not stored within %s of admission", ref.Kind, ref.Name, bindGrace))
	default:
		return 0, err
	}
}

func (t *term) claimKeysGet(uid string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.claimKeys[uid]
	return k, ok
}

// bindTo makes the object own the claim and clears the pending label, in one patch.
func (t *term) bindTo(ctx context.Context, c *quotav1alpha1.ResourceClaim, apiVersion, kind, name string, uid types.UID) error {
	if apiVersion == "" || kind == "" {
		gvr, _ := parseGVR(c.Annotations[AnnotationResource])
		apiVersion = schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}.String()
		kind = c.Spec.ResourceRef.Kind
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": c.ResourceVersion,
			"labels":          map[string]any{LabelBinding: nil},
			"ownerReferences": append(c.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}),
		},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	err = t.r.client.Patch(ctx, c, client.RawPatch(types.MergePatchType, data))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// dropUnbound deletes a claim whose object was never stored.
func (t *term) dropUnbound(ctx context.Context, c *quotav1alpha1.ResourceClaim, why string) error {
	klog.FromContext(ctx).V(2).Info("Deleting a claim whose object was never stored", "claim", klog.KObj(c), "why", why)
	err := t.r.client.Delete(ctx, c, client.Preconditions{UID: &c.UID})
	if isNotFoundOrGone(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// parseGVR reads resource.version.group (group may be empty).
func parseGVR(s string) (schema.GroupVersionResource, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return schema.GroupVersionResource{}, false
	}
	gvr := schema.GroupVersionResource{Resource: parts[0], Version: parts[1]}
	if len(parts) == 3 {
		gvr.Group = parts[2]
	}
	return gvr, true
}

// FormatGVR writes resource.version.group, the form of AnnotationResource.
func FormatGVR(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "." + gvr.Version
	}
	return gvr.Resource + "." + gvr.Version + "." + gvr.Group
}
