package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

const (
	// maxRequestDuration bounds how long after admission a create can still
	// store its object: the API server cuts requests at 60 s.
	maxRequestDuration = 70 * time.Second
	// storeGrace is how long after a create ended without a clear answer (a
	// timeout, a server error) its object may still land in storage.
	storeGrace = 5 * time.Second
	// recheckPeriod is how often a grant whose create has not reported its
	// end is checked against storage.
	recheckPeriod = 5 * time.Second
)

// outcome is what the server reported of a create after admission.
type outcome int

const (
	outcomeUnknown outcome = iota // not reported (yet)
	outcomeStored                 // answered 2xx: the object is stored
	outcomeRefused                // answered 4xx: it was never stored
	outcomeUnclear                // 5xx, timeout or panic: look it up
)

// materializeOne writes the claim of a grant made at admission once its
// object is stored: already granted, owned by that object (deleting the object
// releases the quota), replacing the grant in the journal in one transaction.
// A grant whose create was refused after admission, or whose object cannot
// appear any more, is released.
func (t *term) materializeOne(ctx context.Context, k string) error {
	t.mu.Lock()
	p, ok := t.pending[k]
	var out outcome
	var ended time.Time
	if ok {
		out, ended = p.outcome, p.ended
	}
	t.mu.Unlock()
	if !ok {
		return nil // written or released meanwhile
	}
	if p.Update {
		return t.settleUpdate(ctx, p, out, ended)
	}
	gvr, ok := ParseGVR(p.Resource)
	ref := p.Spec.ResourceRef
	if !ok || ref == nil {
		return t.release(ctx, k, "it names no object")
	}
	if out != outcomeStored {
		owner, err := t.r.metadata.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil && string(owner.UID) == p.ObjectUID:
		case err == nil || apierrors.IsNotFound(err):
			switch {
			case out == outcomeRefused:
				return t.release(ctx, k, fmt.Sprintf("the create of %s %s was refused after admission", ref.Kind, ref.Name))
			case out == outcomeUnclear && time.Since(ended) >= storeGrace:
				return t.release(ctx, k, fmt.Sprintf("the create of %s %s failed and the object was not stored", ref.Kind, ref.Name))
			case time.Since(p.Created.Time) >= maxRequestDuration:
				return t.release(ctx, k, fmt.Sprintf("%s %s was not stored within %s of admission", ref.Kind, ref.Name, maxRequestDuration))
			}
			t.materialize.AddAfter(k, recheckPeriod)
			return nil
		default:
			return err
		}
	}
	return t.writeAdmitted(ctx, p, gvr, p.Name)
}

// writeAdmitted writes the claim of grant p under name: decided, and owned
// by its object when an ownerReference can be valid (the object is cluster
// scoped or in the claim's namespace; Kubernetes treats any other as absent
// and would collect the claim). A claim without a valid owner is tied to its
// object by the engine's own watch (objects.go). When the name is taken by a
// claim that is not this grant's, the claim is written under a name unique
// to its object: a stored object is never left uncharged.
func (t *term) writeAdmitted(ctx context.Context, p *pendingClaim, gvr schema.GroupVersionResource, name string) error {
	k := p.key()
	ref := p.Spec.ResourceRef
	t.mu.Lock()
	qc, _ := t.eng.Claim(provisionalID(k))
	d, _ := t.eng.Decision(provisionalID(k))
	t.mu.Unlock()
	c := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: p.Namespace, Name: name, Labels: p.Labels, Annotations: p.annotations(),
			UID: uuid.NewUUID(), CreationTimestamp: metav1.Now(), Generation: 1,
		},
		Spec: p.Spec,
	}
	if name != p.Name {
		c.Annotations[AnnotationGrantKey] = k
	}
	if ref.Namespace == "" || ref.Namespace == p.Namespace {
		c.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}.String(),
			Kind:       ref.Kind, Name: ref.Name, UID: types.UID(p.ObjectUID),
		}}
	}
	c.Status = claimStatus(c, qc, d, t.sealer)
	written := t.writeJournal(ctx, &journalOps{creates: []*quotav1alpha1.ResourceClaim{c}})
	if written.err != nil {
		return fmt.Errorf("writing claim %s: %w", k, written.err)
	}
	if _, exists := written.exists[key(p.Namespace, name)]; exists {
		return t.adoptStored(ctx, p, gvr, name)
	}
	decisionsTotal.WithLabelValues("granted", string(d.Outcome)).Inc()
	t.mu.Lock()
	t.adoptLocked(c) // unless the cache saw the claim first and adopted it
	t.mu.Unlock()
	return nil
}

// adoptStored settles a grant whose claim name is taken: a claim this engine
// wrote (a write that failed in transit yet landed) is adopted; any other
// claim of that name (created through the API after admission checked the
// name) makes the grant's claim go under a name derived from its object.
func (t *term) adoptStored(ctx context.Context, p *pendingClaim, gvr schema.GroupVersionResource, name string) error {
	k := p.key()
	stored := &quotav1alpha1.ResourceClaim{}
	if err := t.r.client.Get(ctx, clientKey(p.Namespace, name), stored); err != nil {
		return fmt.Errorf("reading claim %s/%s: %w", p.Namespace, name, err)
	}
	t.mu.Lock()
	adopted := t.adoptLocked(stored)
	t.mu.Unlock()
	if adopted {
		return nil
	}
	if name != p.Name {
		// Even the derived name is taken: retried, the grant held meanwhile.
		return fmt.Errorf("the claim names %s and %s/%s are both taken by other claims", k, p.Namespace, name)
	}
	klog.FromContext(ctx).Info("The name of a claim granted at admission was taken after admission; writing it under a name derived from its object", "claim", k)
	return t.writeAdmitted(ctx, p, gvr, derivedName(p))
}

// derivedName is a claim name unique to the grant's object and policy.
func derivedName(p *pendingClaim) string {
	sum := sha256.Sum256([]byte(p.ObjectUID + "/" + p.Policy))
	suffix := "-" + hex.EncodeToString(sum[:6])
	base := p.Name
	if len(base)+len(suffix) > 253 {
		base = base[:253-len(suffix)]
	}
	return base + suffix
}

// release forgets a grant whose object never got stored.
func (t *term) release(ctx context.Context, k, why string) error {
	klog.FromContext(ctx).V(2).Info("Releasing quota granted at admission", "claim", k, "why", why)
	if res := t.writeJournal(ctx, &journalOps{releases: []string{k}}); res.err != nil {
		return fmt.Errorf("releasing the grant of claim %s: %w", k, res.err)
	}
	t.mu.Lock()
	if p := t.pending[k]; p != nil {
		t.forgetPendingLocked(p)
	}
	t.mu.Unlock()
	t.kickNow()
	return nil
}

// ParseGVR reads resource.version.group (group may be empty).
func ParseGVR(s string) (schema.GroupVersionResource, bool) {
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
