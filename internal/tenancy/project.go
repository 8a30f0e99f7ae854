package tenancy

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// ProjectReconciler keeps a Project's organization label and ownerReference
// and reports whether its organization exists.
type ProjectReconciler struct {
	Client client.Client
}

// SetupWithManager registers the controller.
func (r *ProjectReconciler) SetupWithManager(mgr ctrl.Manager) error {
	projectsOf := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &rmv1alpha1.ProjectList{}
		if err := r.Client.List(ctx, list, client.MatchingFields{projectOwnerIndex: o.GetName()}); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot list the projects of an organization", "organization", o.GetName())
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("project").
		For(&rmv1alpha1.Project{}).
		Watches(&rmv1alpha1.Organization{}, projectsOf).
		WithOptions(controllerOptions()).
		Complete(r)
}

// Reconcile sets the project's label and ownerReference when its
// organization exists, and its Ready condition.
func (r *ProjectReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &rmv1alpha1.Project{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	orgName := p.Spec.OwnerRef.Name
	org := &rmv1alpha1.Organization{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: orgName}, org)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	found := err == nil

	ready := metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: rmv1alpha1.ProjectReasonReady,
		Message: fmt.Sprintf("belongs to Organization %s", orgName)}
	switch {
	case !found:
		ready = metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: rmv1alpha1.ProjectReasonOrganizationNotFound,
			Message: fmt.Sprintf("Organization %s named by spec.ownerRef does not exist; create it, or delete this project", orgName)}
	case org.DeletionTimestamp != nil:
		ready = metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: rmv1alpha1.ProjectReasonOrganizationDeleting,
			Message: fmt.Sprintf("Organization %s is being deleted, and its projects with it", orgName)}
	default:
		if err := r.ensureMetadata(ctx, p, org); err != nil {
			return ctrl.Result{}, err
		}
	}
	ready.ObservedGeneration = p.Generation
	status := p.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, ready)
	status.ObservedGeneration = p.Generation
	if equality.Semantic.DeepEqual(&p.Status, status) {
		return ctrl.Result{}, nil
	}
	updated := p.DeepCopy()
	updated.Status = *status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote project status", "project", klog.KObj(p), "ready", ready.Reason)
	return ctrl.Result{}, nil
}

// ensureMetadata labels the project with its organization's name and makes
// the organization an owner, as admission does at create (objects written
// under quotaplane controller, without that admission, get them here).
func (r *ProjectReconciler) ensureMetadata(ctx context.Context, p *rmv1alpha1.Project, org *rmv1alpha1.Organization) error {
	patched := p.DeepCopy()
	if patched.Labels == nil {
		patched.Labels = map[string]string{}
	}
	patched.Labels[rmv1alpha1.OrganizationNameLabel] = org.Name
	owned := false
	for _, ref := range patched.OwnerReferences {
		if ref.UID == org.UID {
			owned = true
		}
	}
	if !owned {
		patched.OwnerReferences = append(patched.OwnerReferences, metav1.OwnerReference{
			APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Organization", Name: org.Name, UID: org.UID, BlockOwnerDeletion: ptr.To(true),
		})
	}
	if equality.Semantic.DeepEqual(p.ObjectMeta, patched.ObjectMeta) {
		return nil
	}
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("labelling the project and setting its owner: %w", err)
	}
	*p = *patched
	return nil
}
