package tenancy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// projectReconciler keeps a Project's organization label and ownerReference
// and reports whether its organization exists.
type projectReconciler struct {
	// cache reads the term's informers.
	cache *stores
	// client writes through the API server.
	client writer
	// charged lists the objects charged to a project; nil: not checked.
	charged func(ctx context.Context, project string) ([]string, error)
}

// reconcile sets the project's label and ownerReference when its
// organization exists, and its Ready condition. It never asks to look again
// (the returned delay is zero): its organization's changes say when.
func (r *projectReconciler) reconcile(ctx context.Context, name string) (time.Duration, error) {
	p := &rmv1alpha1.Project{}
	if err := r.cache.get(client.ObjectKey{Name: name}, p); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		return r.finalize(ctx, p)
	}
	if !controllerutil.ContainsFinalizer(p, rmv1alpha1.ProjectFinalizer) {
		patched := p.DeepCopy()
		controllerutil.AddFinalizer(patched, rmv1alpha1.ProjectFinalizer)
		if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
			return 0, fmt.Errorf("adding finalizer: %w", err)
		}
		p = patched
	}
	var again time.Duration
	orgName := p.Spec.OwnerRef.Name
	org := &rmv1alpha1.Organization{}
	err := r.cache.get(client.ObjectKey{Name: orgName}, org)
	if client.IgnoreNotFound(err) != nil {
		return 0, err
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
			return 0, err
		}
		conflict, waiting, err := r.ensureNamespace(ctx, p, org)
		if err != nil {
			return 0, err
		}
		switch {
		case waiting != "":
			ready = metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: rmv1alpha1.OrganizationReasonProvisioning, Message: waiting}
			again = namespaceWait
		case conflict != "":
			ready = metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: rmv1alpha1.OrganizationReasonNamespaceConflict, Message: conflict}
		}
	}
	ready.ObservedGeneration = p.Generation
	status := p.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, ready)
	status.ObservedGeneration = p.Generation
	if equality.Semantic.DeepEqual(&p.Status, status) {
		return again, nil
	}
	updated := p.DeepCopy()
	updated.Status = *status
	if err := r.client.Status().Update(ctx, updated); err != nil {
		return 0, fmt.Errorf("writing status: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote project status", "project", klog.KObj(p), "ready", ready.Reason)
	return again, nil
}

// namespaceWait is how often a project waiting for the namespace of a
// previous project of its name to go looks again.
const namespaceWait = time.Second

// finalize drops the finalizer of a deleted project once no object anywhere
// is charged to it any more; until then its Ready condition names them.
func (r *projectReconciler) finalize(ctx context.Context, p *rmv1alpha1.Project) (time.Duration, error) {
	if !controllerutil.ContainsFinalizer(p, rmv1alpha1.ProjectFinalizer) {
		return 0, nil
	}
	if r.charged != nil {
		charged, err := r.charged(ctx, p.Name)
		if err != nil {
			return 0, err
		}
		if len(charged) > 0 {
			status := p.Status.DeepCopy()
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: rmv1alpha1.ProjectReasonDeleting, ObservedGeneration: p.Generation,
				Message: "being deleted; waiting until no object is charged to it: " + summarize(charged) + "; delete them, or their claims"})
			if !equality.Semantic.DeepEqual(&p.Status, status) {
				updated := p.DeepCopy()
				updated.Status = *status
				if err := r.client.Status().Update(ctx, updated); err != nil {
					return 0, client.IgnoreNotFound(err)
				}
			}
			return deletionPoll, nil
		}
	}
	patched := p.DeepCopy()
	controllerutil.RemoveFinalizer(patched, rmv1alpha1.ProjectFinalizer)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	klog.FromContext(ctx).V(2).Info("Nothing is charged to the deleted project any more; removed its finalizer", "project", klog.KObj(p))
	return 0, nil
}

// ensureNamespace makes the project's namespace at the root, where its
// control plane's quota objects are kept (docs/control-planes.md): labelled
// with its organization and controlled by the project, so that it goes with
// it. It returns why not when a namespace of that name is someone else's,
// and what it waits for while a previous project's namespace is deleted.
func (r *projectReconciler) ensureNamespace(ctx context.Context, p *rmv1alpha1.Project, org *rmv1alpha1.Organization) (conflict, waiting string, err error) {
	name := planes.ProjectNamespace(p.Name)
	ns := &corev1.Namespace{}
	err = r.cache.get(client.ObjectKey{Name: name}, ns)
	if err == nil {
		ref := metav1.GetControllerOf(ns)
		switch {
		case ref != nil && ref.UID == p.UID:
			return "", "", nil
		case ns.DeletionTimestamp != nil || (ref != nil && ref.Kind == "Project" && ref.Name == p.Name):
			return "", fmt.Sprintf("namespace %s of a previous project named %s is still being deleted; waiting until it is gone", name, p.Name), nil
		}
		return fmt.Sprintf("namespace %s exists and is not this project's (it has no controller ownerReference to Project %s with uid %s); delete it, or create the project under another name", name, p.Name, p.UID), "", nil
	}
	if !apierrors.IsNotFound(err) {
		return "", "", err
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:          map[string]string{rmv1alpha1.OrganizationNameLabel: org.Name, rmv1alpha1.ProjectNameLabel: p.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(p, rmv1alpha1.SchemeGroupVersion.WithKind("Project"))},
	}}
	if err := r.client.Create(ctx, ns); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return "", fmt.Sprintf("namespace %s exists and is not seen yet, or is not this project's: delete it if it is not, or create the project under another name", name), nil
		}
		return "", "", fmt.Errorf("creating the project's namespace %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Created the project's namespace", "namespace", name)
	return "", "", nil
}

// ensureMetadata labels the project with its organization's name and makes
// the organization an owner, as admission does at create (objects written
// under quotaplane controller, without that admission, get them here).
func (r *projectReconciler) ensureMetadata(ctx context.Context, p *rmv1alpha1.Project, org *rmv1alpha1.Organization) error {
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
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("labelling the project and setting its owner: %w", err)
	}
	*p = *patched
	return nil
}
