package claimguard

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// holderOf looks up where the object of claim c (made for an object) is
// stored, and whether it is live there: a member cluster's, by its label (not
// looked up); a control plane's, by its annotation, through the plane; else
// the root's. gone, when not nil, remembers the planes found gone within
// one request (a namespace holding many claims of one plane).
func (p *plugin) holderOf(ctx context.Context, c *quotav1alpha1.ResourceClaim, gone map[string]bool) (holder, error) {
	if cluster := c.Labels[members.Label]; cluster != "" {
		return holder{cluster: cluster}, nil
	}
	mark, inPlane := c.Annotations[planes.Annotation]
	if !inPlane {
		live, err := p.objectLive(ctx, p.Client(), c)
		return holder{live: live}, err
	}
	h := holder{plane: mark}
	pl, err := planes.Parse(mark)
	if err != nil {
		return h, fmt.Errorf("the claim's annotation %s: %w", planes.Annotation, err)
	}
	if gone[mark] {
		return h, nil
	}
	// A plane whose owner is gone or being deleted holds nothing any more:
	// its data is removed with the owner (planeserve's Cleaner) and nobody
	// reaches it.
	owner, err := p.Client().Resource(ownerResource(pl)).Get(ctx, pl.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && owner.GetDeletionTimestamp() != nil):
		if gone != nil {
			gone[mark] = true
		}
		return h, nil
	case err != nil:
		return h, fmt.Errorf("reading %s %s, the owner of control plane %s: %w", pl.OwnerKind(), pl.Name, mark, err)
	}
	if p.planeClients == nil {
		return h, fmt.Errorf("this server reads no control plane's objects")
	}
	cl, err := p.planeClients(pl)
	if err != nil {
		return h, fmt.Errorf("a client of control plane %s: %w", mark, err)
	}
	h.live, err = p.objectLive(ctx, cl, c)
	return h, err
}

// ownerResource is the resource of the owner of plane pl, at the root.
func ownerResource(pl planes.Plane) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: planes.Group, Version: planes.Version, Resource: string(pl.Kind)}
}

// objectLive reads the claim's object live through cl, at the version
// served now (the one the claim recorded may not be served any more). An
// object whose kind serves no version at all is taken to be live: nothing
// may release its quota until it can be read again.
func (p *plugin) objectLive(ctx context.Context, cl dynamic.Interface, c *quotav1alpha1.ResourceClaim) (bool, error) {
	gvr, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	ref := c.Spec.ResourceRef
	if !ok || ref == nil {
		return false, nil
	}
	p.servedOnce.Do(func() { p.served = kinds.New(p.Client()) })
	var o *unstructured.Unstructured
	err := p.served.Read(ctx, gvr, func(at schema.GroupVersionResource) error {
		var err error
		o, err = cl.Resource(at).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		return err
	})
	switch {
	case errors.Is(err, kinds.ErrNotServed):
		return true, nil
	case planes.ObjectNotFound(err, ref.Name):
		return false, nil
	case err != nil:
		return false, err
	}
	return string(o.GetUID()) == c.Annotations[quotav1alpha1.AnnotationResourceUID] && o.GetDeletionTimestamp() == nil, nil
}
