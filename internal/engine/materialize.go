package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

const (
	// materializeDelay is how long after admission the engine first looks
	// for the object: by then it is normally stored.
	materializeDelay = 20 * time.Millisecond
	// materializeGrace is how long a grant made at admission waits for its
	// object: an object not stored by then (a later admission step refused
	// it, or the request died) never will be, and the grant is released.
	materializeGrace = 5 * time.Second
)

// materializeOne creates the claim of a grant made at admission once its
// object is stored, owned by that object (deleting the object releases the
// quota); or releases the grant when the object never appears.
func (t *term) materializeOne(ctx context.Context, k string) error {
	t.mu.Lock()
	p, ok := t.pending[k]
	t.mu.Unlock()
	if !ok {
		return nil // adopted or released meanwhile
	}
	gvr, ok := parseGVR(p.Resource)
	ref := p.Spec.ResourceRef
	if !ok || ref == nil {
		t.release(ctx, k, "it names no object")
		return nil
	}
	owner, err := t.r.metadata.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case err == nil && string(owner.UID) == p.ObjectUID:
	case err == nil || apierrors.IsNotFound(err):
		if time.Since(p.Created.Time) < materializeGrace {
			t.materialize.AddAfter(k, 50*time.Millisecond)
			return nil
		}
		t.release(ctx, k, fmt.Sprintf("%s %s was not stored within %s of admission", ref.Kind, ref.Name, materializeGrace))
		return nil
	default:
		return err
	}
	c := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, Annotations: p.annotations(),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}.String(),
				Kind:       ref.Kind, Name: owner.Name, UID: owner.UID,
			}},
		},
		Spec: p.Spec,
	}
	err = t.r.client.Create(ctx, c)
	if apierrors.IsAlreadyExists(err) {
		// An earlier leader created it; adopt the stored one.
		err = t.r.client.Get(ctx, clientKey(p.Namespace, p.Name), c)
	}
	if err != nil {
		return fmt.Errorf("creating claim %s: %w", k, err)
	}
	t.mu.Lock()
	adopted := t.adoptLocked(c)
	d, _ := t.eng.Decision(string(c.UID))
	qc, _ := t.eng.Claim(string(c.UID))
	t.mu.Unlock()
	if adopted {
		// Write the decision at once, from the object the create returned,
		// rather than waiting for the cache: the grant leaves the ledger sooner.
		if err := t.writeClaimStatus(ctx, c, string(c.UID), qc, d); err != nil {
			t.claims.Add(string(c.UID))
		}
	}
	return nil
}

// release forgets a grant whose object never got stored.
func (t *term) release(ctx context.Context, k, why string) {
	klog.FromContext(ctx).V(2).Info("Releasing quota granted at admission", "claim", k, "why", why)
	t.mu.Lock()
	delete(t.pending, k)
	t.eng.RemoveClaim(provisionalID(k))
	t.ledgerStale = true
	t.mu.Unlock()
	t.kickNow()
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
