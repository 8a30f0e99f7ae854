package planeserve

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/storage"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// setNamespace sets obj's namespace in place (obj belongs to the request).
func setNamespace(obj runtime.Object, ns string) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetNamespace(ns)
	}
}

// shown is obj as plane p shows it: a quota object of its quota namespace
// in the plane's system namespace, or a claim in the namespace it names
// (planeNamespace). obj may be the watch cache's own, so it is copied,
// never changed.
func (r *router) shown(p planes.Plane, obj runtime.Object) runtime.Object {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetNamespace() != p.QuotaNamespace() {
		return obj
	}
	c := obj.DeepCopyObject()
	setNamespace(c, r.planeNamespace(m))
	return c
}

// planeNamespace is the plane's namespace a quota object of the plane's
// quota namespace is shown in: a claim's own (LabelPlaneNamespace), and the
// plane's system namespace for the rest.
func (r *router) planeNamespace(m metav1.Object) string {
	if r.claims {
		if ns := m.GetLabels()[quotav1alpha1.LabelPlaneNamespace]; ns != "" {
			return ns
		}
	}
	return r.systemNamespace
}

// inView reports whether an object shown as plane p shows it is in the
// plane namespace a request named ("" for every namespace).
func inView(obj runtime.Object, ns string) bool {
	if ns == "" {
		return true
	}
	m, err := meta.Accessor(obj)
	return err == nil && m.GetNamespace() == ns
}

// show changes out, an object the storage filled for this request, as the
// plane shows it. An unstructured object may share its content with the
// watch cache, so that content is copied first.
func (r *router) show(p planes.Plane, out runtime.Object) {
	m, err := meta.Accessor(out)
	if err != nil || m.GetNamespace() != p.QuotaNamespace() {
		return
	}
	if u, ok := out.(*unstructured.Unstructured); ok {
		u.Object = runtime.DeepCopyJSON(u.Object)
	}
	setNamespace(out, r.planeNamespace(m))
}

// showList shows every item of list as the plane does.
func (r *router) showList(p planes.Plane, list runtime.Object) {
	if ul, ok := list.(*unstructured.UnstructuredList); ok {
		for i := range ul.Items {
			r.show(p, &ul.Items[i])
		}
		return
	}
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		r.show(p, o)
		return nil
	})
}

// ownProject reports whether obj is a Project of the organization whose
// plane p is.
func (r *router) ownProject(p planes.Plane, obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && p.Kind == planes.Organizations && m.GetLabels()[rmv1alpha1.OrganizationNameLabel] == p.Name
}

// checkProject refuses a Project written in an organization's plane that
// does not belong to that organization (admission sets the label from the
// path; this holds even when admission did not run).
func (r *router) checkProject(p planes.Plane, obj runtime.Object) error {
	if r.ownProject(p, obj) {
		return nil
	}
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetName()
	}
	return apierrors.NewForbidden(r.gr, name, fmt.Errorf("a project written in the control plane of organization %s belongs to it: its label %s must be %q",
		p.Name, rmv1alpha1.OrganizationNameLabel, p.Name))
}

// organizationOnly narrows a list or watch to the projects of the
// organization whose plane p is.
func (r *router) organizationOnly(p planes.Plane, pred storage.SelectionPredicate) storage.SelectionPredicate {
	req, err := labels.NewRequirement(rmv1alpha1.OrganizationNameLabel, selection.Equals, []string{p.Name})
	if err != nil {
		// Not a valid label value: no project can carry it.
		req, _ = labels.NewRequirement(rmv1alpha1.OrganizationNameLabel, selection.DoesNotExist, nil)
	}
	sel := pred.Label
	if sel == nil {
		sel = labels.Everything()
	}
	pred.Label = sel.Add(*req)
	return pred
}
