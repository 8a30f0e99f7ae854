package existing

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// source is where existing objects are listed: the root, or one control
// plane.
type source struct {
	dyn   dynamic.Interface
	plane *planes.Plane
}

// where names the plane after an object's name in a message.
func (s source) where() string {
	if s.plane == nil {
		return ""
	}
	return " in control plane " + s.plane.String()
}

// inPlane names the plane a claim's object is stored in, after its name.
func inPlane(c *quotav1alpha1.ResourceClaim) string {
	if p := c.Annotations[planes.Annotation]; p != "" {
		return " in control plane " + p
	}
	return ""
}

// sources are the root and every served control plane that stores its own
// objects of gr (docs/control-planes.md); the planes not served are noted in
// the pass. A plane whose owner is being deleted is not listed: its removal
// deletes its objects and releases their claims.
func (c *Charger) sources(ctx context.Context, gr schema.GroupResource, p *pass) ([]source, error) {
	out := []source{{dyn: c.Dynamic}}
	if c.Planes == nil || !planes.OwnStorage(gr) {
		return out, nil
	}
	listed, err := c.Planes(ctx)
	if err != nil {
		return nil, err
	}
	for _, l := range listed {
		if !l.Served {
			p.unexamined = append(p.unexamined, l.Plane.String()+": "+l.NotServed)
			continue
		}
		dyn, err := c.PlaneDynamic(l.Plane)
		if err != nil {
			return nil, err
		}
		plane := l.Plane
		out = append(out, source{dyn: dyn, plane: &plane})
	}
	return out, nil
}

// each calls do for every object of gvr the source stores, page by page.
// A plane that answers 404 is gone (its owner deleted since it was listed):
// it has no objects.
func (s source) each(ctx context.Context, gvr schema.GroupVersionResource, do func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		list, err := s.dyn.Resource(gvr).List(ctx, opts)
		if s.plane != nil && apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s%s to charge the existing ones: %w", gvr.GroupResource(), s.where(), err)
		}
		for i := range list.Items {
			if err := do(&list.Items[i]); err != nil {
				return err
			}
		}
		if list.GetContinue() == "" {
			return nil
		}
		opts.Continue = list.GetContinue()
	}
}
