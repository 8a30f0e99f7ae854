package planes

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Listed is a plane whose owner exists and is not being deleted (the data
// of a plane whose owner is being deleted is removed with it, and its
// claims released: docs/control-planes.md).
type Listed struct {
	Plane
	// Served: the owner is Ready, so that the plane answers. When not,
	// NotServed says why.
	Served    bool
	NotServed string
}

// List reads, through dyn (a client of the root), every Organization and
// Project, and returns their planes; none when the tenancy kinds are not
// served (quotaplane controller against another cluster).
func List(ctx context.Context, dyn dynamic.Interface) ([]Listed, error) {
	var out []Listed
	for _, kind := range []Kind{Organizations, Projects} {
		gvr := schema.GroupVersionResource{Group: Group, Version: Version, Resource: string(kind)}
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := dyn.Resource(gvr).List(ctx, opts)
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s to find their control planes: %w", gvr.GroupResource(), err)
			}
			for i := range list.Items {
				o := &list.Items[i]
				if o.GetDeletionTimestamp() != nil {
					continue
				}
				l := Listed{Plane: Plane{Kind: kind, Name: o.GetName(), UID: o.GetUID()}}
				l.Served, l.NotServed = ready(o)
				out = append(out, l)
			}
			if list.GetContinue() == "" {
				break
			}
			opts.Continue = list.GetContinue()
		}
	}
	return out, nil
}

// ready reports whether o's Ready condition is True, and why not.
func ready(o *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		if m["status"] == string(metav1.ConditionTrue) {
			return true, ""
		}
		return false, fmt.Sprintf("its owner is not Ready (%v: %v)", m["reason"], m["message"])
	}
	return false, "its owner has not been reconciled yet"
}

// ObjectNotFound reports whether err is a 404 about the object named name,
// read through a plane: a plane that is not served (its owner missing, not
// Ready or being deleted) also answers 404, naming no object, and that
// says nothing of whether the object is still stored.
func ObjectNotFound(err error, name string) bool {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d != nil && d.Name == name
}

// Find reads, through dyn (a client of the root), the owner of p, and says
// what is wrong when there is no plane to reach: no such owner (with the
// names there are, when few), or an owner being deleted.
func Find(ctx context.Context, dyn dynamic.Interface, p Plane) error {
	gvr := schema.GroupVersionResource{Group: Group, Version: Version, Resource: string(p.Kind)}
	o, err := dyn.Resource(gvr).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		list, lerr := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 11})
		known := ""
		if lerr == nil {
			var names []string
			for _, i := range list.Items {
				names = append(names, i.GetName())
			}
			switch {
			case len(names) == 0:
				known = fmt.Sprintf("; there are no %s", p.Kind)
			case len(names) <= 10 && list.GetContinue() == "":
				known = fmt.Sprintf("; the %s are: %s", p.Kind, strings.Join(names, ", "))
			}
		}
		return fmt.Errorf("there is no %s %q, so there is no control plane to reach%s (kubectl get %s lists them)", singular(p.Kind), p.Name, known, p.Kind)
	case err != nil:
		return fmt.Errorf("reading %s %q: %w", singular(p.Kind), p.Name, err)
	case o.GetDeletionTimestamp() != nil:
		return fmt.Errorf("%s %q is being deleted, and its control plane with it", singular(p.Kind), p.Name)
	}
	return nil
}

func singular(k Kind) string { return strings.TrimSuffix(string(k), "s") }
