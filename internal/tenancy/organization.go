package tenancy

import (
	"context"
	"fmt"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// deletionPoll is how often a deleted organization checks that its projects
// and namespace are gone, besides the events that say so.
const deletionPoll = 2 * time.Second

// OrganizationReconciler gives an Organization its namespace, its owner's
// bindings, and removes them (with its projects) when it is deleted.
type OrganizationReconciler struct {
	Client client.Client
	// APIReader reads namespaces the cache does not hold (those without the
	// organization label), to tell a conflicting namespace from a missing one.
	APIReader client.Reader
}

// SetupWithManager registers the controller.
func (r *OrganizationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabel := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if name := o.GetLabels()[rmv1alpha1.OrganizationNameLabel]; name != "" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		}
		return nil
	})
	byOwner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.(*rmv1alpha1.Project).Spec.OwnerRef.Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("organization").
		For(&rmv1alpha1.Organization{}).
		Watches(&corev1.Namespace{}, byLabel).
		Watches(&rbacv1.RoleBinding{}, byLabel).
		Watches(&rbacv1.ClusterRole{}, byLabel).
		Watches(&rbacv1.ClusterRoleBinding{}, byLabel).
		Watches(&rmv1alpha1.Project{}, byOwner).
		WithOptions(controllerOptions()).
		Complete(r)
}

// ownerRoleName names the ClusterRole and ClusterRoleBinding that let an
// organization's creator read and charge it and create projects. The colons
// keep it apart from the roles quotaplane ships.
func ownerRoleName(org string) string { return "quotaplane:organization:" + org }

// Reconcile makes the organization's namespace and bindings exist, or, for a
// deleted organization, makes its projects and namespace not exist.
func (r *OrganizationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	org := &rmv1alpha1.Organization{}
	if err := r.Client.Get(ctx, req.NamespacedName, org); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("organization", klog.KObj(org)))
	if org.DeletionTimestamp != nil {
		return r.finalize(ctx, org)
	}
	if !controllerutil.ContainsFinalizer(org, rmv1alpha1.OrganizationFinalizer) {
		patched := org.DeepCopy()
		controllerutil.AddFinalizer(patched, rmv1alpha1.OrganizationFinalizer)
		if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(org, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
		org = patched
	}

	status := org.Status.DeepCopy()
	ready := metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: rmv1alpha1.OrganizationReasonReady,
		Message: fmt.Sprintf("namespace %s exists and the organization's creator is bound to %s there", rmv1alpha1.OrganizationNamespace(org.Name), rmv1alpha1.OrganizationOwnerRole)}
	var result ctrl.Result
	var rerr error
	ns, waitMsg, conflict, err := r.ensureNamespace(ctx, org)
	status.Namespace = ""
	switch {
	case err != nil:
		ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, fmt.Sprintf("cannot create namespace %s: %v; retrying", rmv1alpha1.OrganizationNamespace(org.Name), err))
		rerr = err
	case conflict != "":
		ready = notReady(rmv1alpha1.OrganizationReasonNamespaceConflict, conflict)
		result.RequeueAfter = deletionPoll * 5
	case waitMsg != "":
		ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, waitMsg)
		result.RequeueAfter = deletionPoll
	default:
		status.Namespace = ns.Name
		if err := r.ensureBindings(ctx, org); err != nil {
			ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, fmt.Sprintf("cannot bind the organization's owner: %v; retrying", err))
			rerr = err
		} else if creator(org) == "" {
			ready.Message = fmt.Sprintf("namespace %s exists; no creator is recorded (annotation %s), so nobody is bound as owner: bind owners to %s there yourself",
				ns.Name, rmv1alpha1.CreatorAnnotation, rmv1alpha1.OrganizationOwnerRole)
		} else if !meta.IsStatusConditionTrue(org.Status.Conditions, rmv1alpha1.ConditionReady) {
			// Ready promises that the owner can act: wait until the
			// authorizer has seen the bindings just made.
			missing, err := r.ownerCannot(ctx, org)
			switch {
			case err != nil:
				ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, fmt.Sprintf("cannot check the owner's access: %v; retrying", err))
				rerr = err
			case missing != "":
				ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, "the owner's bindings exist but do not allow "+missing+" yet; waiting for the authorizer to see them")
				result.RequeueAfter = authorizerPoll
			}
		}
	}
	ready.ObservedGeneration = org.Generation
	meta.SetStatusCondition(&status.Conditions, ready)
	if rerr == nil {
		status.ObservedGeneration = org.Generation
	}
	if err := r.writeStatus(ctx, org, status); err != nil {
		return ctrl.Result{}, err
	}
	return result, rerr
}

// authorizerPoll is how often a new organization checks that its owner's
// bindings are in force.
const authorizerPoll = 100 * time.Millisecond

// ownerCannot asks the authorizer, as the organization's creator, the two
// questions its bindings answer: creating projects in it (docs/authorization.md)
// and charging it. It returns the first that is not allowed yet, or "".
func (r *OrganizationReconciler) ownerCannot(ctx context.Context, org *rmv1alpha1.Organization) (string, error) {
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Group: rmv1alpha1.GroupName, Resource: "organizations", Subresource: "projects", Name: org.Name, Namespace: rmv1alpha1.OrganizationNamespace(org.Name)},
		{Verb: "claim", Group: rmv1alpha1.GroupName, Resource: "organizations", Name: org.Name},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		s := subject(creator(org))
		if s.Kind == rbacv1.ServiceAccountKind {
			sar.Spec.User = "system:serviceaccount:" + s.Namespace + ":" + s.Name
			sar.Spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
		} else {
			sar.Spec.User = s.Name
			sar.Spec.Groups = []string{"system:authenticated"}
		}
		if err := r.Client.Create(ctx, sar); err != nil {
			return "", fmt.Errorf("SubjectAccessReview: %w", err)
		}
		if !sar.Status.Allowed {
			what := attrs.Verb + " " + attrs.Resource
			if attrs.Subresource != "" {
				what += "/" + attrs.Subresource
			}
			return what, nil
		}
	}
	return "", nil
}

func notReady(reason, msg string) metav1.Condition {
	return metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

func (r *OrganizationReconciler) writeStatus(ctx context.Context, org *rmv1alpha1.Organization, status *rmv1alpha1.OrganizationStatus) error {
	if equality.Semantic.DeepEqual(&org.Status, status) {
		return nil
	}
	updated := org.DeepCopy()
	updated.Status = *status
	if err := r.Client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("writing status: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote organization status", "ready", meta.FindStatusCondition(status.Conditions, rmv1alpha1.ConditionReady).Reason)
	return nil
}

func creator(org *rmv1alpha1.Organization) string {
	return org.Annotations[rmv1alpha1.CreatorAnnotation]
}

// ensureNamespace makes the organization's namespace exist. It returns a
// message instead when it must wait (the namespace of a previous organization
// of the same name is still being deleted) or cannot proceed (the namespace
// belongs to something else).
func (r *OrganizationReconciler) ensureNamespace(ctx context.Context, org *rmv1alpha1.Organization) (ns *corev1.Namespace, wait, conflict string, err error) {
	name := rmv1alpha1.OrganizationNamespace(org.Name)
	ns = &corev1.Namespace{}
	err = r.Client.Get(ctx, types.NamespacedName{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		// Not labelled (so not cached), or missing.
		err = r.APIReader.Get(ctx, types.NamespacedName{Name: name}, ns)
	}
	if apierrors.IsNotFound(err) {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{rmv1alpha1.OrganizationNameLabel: org.Name},
		}}
		if err := controllerutil.SetControllerReference(org, ns, Scheme); err != nil {
			return nil, "", "", err
		}
		if err := r.Client.Create(ctx, ns); err != nil {
			return nil, "", "", err
		}
		klog.FromContext(ctx).V(2).Info("Created the organization's namespace", "namespace", name)
		return ns, "", "", nil
	}
	if err != nil {
		return nil, "", "", err
	}
	owner := metav1.GetControllerOf(ns)
	switch {
	case owner != nil && owner.UID == org.UID && ns.DeletionTimestamp != nil:
		return nil, fmt.Sprintf("namespace %s is being deleted (with everything in it); it is made again once it is gone", name), "", nil
	case owner != nil && owner.UID == org.UID:
	case owner != nil && owner.Kind == "Organization" && ns.DeletionTimestamp != nil:
		return nil, fmt.Sprintf("namespace %s of a previous organization named %s is still being deleted; waiting until it is gone", name, org.Name), "", nil
	default:
		return nil, "", fmt.Sprintf("namespace %s exists and is not this organization's (it has no controller ownerReference to Organization %s with uid %s); delete it, or create the organization under another name",
			name, org.Name, org.UID), nil
	}
	if ns.Labels[rmv1alpha1.OrganizationNameLabel] != org.Name {
		patched := ns.DeepCopy()
		if patched.Labels == nil {
			patched.Labels = map[string]string{}
		}
		patched.Labels[rmv1alpha1.OrganizationNameLabel] = org.Name
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(ns)); err != nil {
			return nil, "", "", err
		}
		ns = patched
	}
	return ns, "", "", nil
}

// subject is the RBAC subject of a user name as the authenticator reports it.
func subject(userName string) rbacv1.Subject {
	const saPrefix = "system:serviceaccount:"
	if rest, ok := strings.CutPrefix(userName, saPrefix); ok {
		if ns, name, ok := strings.Cut(rest, ":"); ok {
			return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
		}
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: userName}
}

// ensureBindings binds the creator: OrganizationOwnerRole in the
// organization's namespace, and the organization's own ClusterRole
// cluster-wide.
func (r *OrganizationReconciler) ensureBindings(ctx context.Context, org *rmv1alpha1.Organization) error {
	who := creator(org)
	if who == "" {
		return nil
	}
	labels := map[string]string{rmv1alpha1.OrganizationNameLabel: org.Name}
	owner := *metav1.NewControllerRef(org, rmv1alpha1.SchemeGroupVersion.WithKind("Organization"))
	subjects := []rbacv1.Subject{subject(who)}

	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: rmv1alpha1.OrganizationOwnerBinding, Namespace: rmv1alpha1.OrganizationNamespace(org.Name), Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rmv1alpha1.OrganizationOwnerRole},
		Subjects:   subjects,
	}
	if err := r.apply(ctx, rb, &rbacv1.RoleBinding{}, func(have client.Object) bool {
		h := have.(*rbacv1.RoleBinding)
		return equality.Semantic.DeepEqual(h.Subjects, rb.Subjects) && h.RoleRef == rb.RoleRef && h.Labels[rmv1alpha1.OrganizationNameLabel] == org.Name
	}); err != nil {
		return fmt.Errorf("RoleBinding %s/%s: %w", rb.Namespace, rb.Name, err)
	}

	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ownerRoleName(org.Name), Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}},
		Rules: []rbacv1.PolicyRule{
			// Read and charge this organization (a ClaimCreationPolicy on
			// Project charges it; docs/authorization.md).
			{APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"organizations"}, ResourceNames: []string{org.Name}, Verbs: []string{"get", "claim"}},
			// Pass the cluster-wide check of creating a Project; the
			// Tenancy admission plugin then asks for organizations/projects
			// in this organization's namespace.
			{APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"projects"}, Verbs: []string{"create"}},
		},
	}
	if err := r.apply(ctx, cr, &rbacv1.ClusterRole{}, func(have client.Object) bool {
		h := have.(*rbacv1.ClusterRole)
		return equality.Semantic.DeepEqual(h.Rules, cr.Rules) && ownedBy(h, org)
	}); err != nil {
		return fmt.Errorf("ClusterRole %s: %w", cr.Name, err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ownerRoleName(org.Name), Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   subjects,
	}
	if err := r.apply(ctx, crb, &rbacv1.ClusterRoleBinding{}, func(have client.Object) bool {
		h := have.(*rbacv1.ClusterRoleBinding)
		return equality.Semantic.DeepEqual(h.Subjects, crb.Subjects) && h.RoleRef == crb.RoleRef && ownedBy(h, org)
	}); err != nil {
		return fmt.Errorf("ClusterRoleBinding %s: %w", crb.Name, err)
	}
	return nil
}

func ownedBy(o client.Object, org *rmv1alpha1.Organization) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == org.UID
}

// apply creates want, or replaces an existing object of its name that
// differs from it (same reports whether have matches). A roleRef cannot be
// changed in place: a binding that differs there is deleted and created
// again.
func (r *OrganizationReconciler) apply(ctx context.Context, want, have client.Object, same func(client.Object) bool) error {
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		err = r.Client.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Not in the cache: not labelled as an organization's, or just made.
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	}
	if err != nil {
		return err
	}
	if same(have) {
		return nil
	}
	// Replace: the old object may be a previous organization's of the same
	// name, or hold another roleRef.
	if err := r.Client.Delete(ctx, have, client.Preconditions{UID: ptr.To(have.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return r.Client.Create(ctx, want)
}

// finalize deletes the organization's projects, its namespace and its
// cluster-wide bindings, and drops the finalizer once they are gone.
func (r *OrganizationReconciler) finalize(ctx context.Context, org *rmv1alpha1.Organization) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(org, rmv1alpha1.OrganizationFinalizer) {
		return ctrl.Result{}, nil
	}
	logger := klog.FromContext(ctx)
	var waiting []string

	projects := &rmv1alpha1.ProjectList{}
	if err := r.Client.List(ctx, projects, client.MatchingFields{projectOwnerIndex: org.Name}); err != nil {
		return ctrl.Result{}, err
	}
	for i := range projects.Items {
		p := &projects.Items[i]
		waiting = append(waiting, "Project "+p.Name)
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, p, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("deleting Project %s: %w", p.Name, err)
		}
		logger.V(2).Info("Deleted a project of the deleted organization", "project", p.Name)
	}

	nsName := rmv1alpha1.OrganizationNamespace(org.Name)
	ns := &corev1.Namespace{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Name: nsName}, ns)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, err
	case ownedBy(ns, org):
		waiting = append(waiting, "Namespace "+nsName)
		if ns.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, ns, client.Preconditions{UID: ptr.To(ns.UID)}); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("deleting namespace %s: %w", nsName, err)
			}
			logger.V(2).Info("Deleted the namespace of the deleted organization", "namespace", nsName)
		}
	}
	for _, o := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{}} {
		err := r.Client.Get(ctx, types.NamespacedName{Name: ownerRoleName(org.Name)}, o)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if !ownedBy(o, org) {
			continue
		}
		if err := r.Client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}

	if len(waiting) > 0 {
		status := org.Status.DeepCopy()
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: rmv1alpha1.OrganizationReasonDeleting, ObservedGeneration: org.Generation,
			Message: "being deleted; waiting until these are gone: " + summarize(waiting)})
		if err := r.writeStatus(ctx, org, status); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: deletionPoll}, nil
	}
	patched := org.DeepCopy()
	controllerutil.RemoveFinalizer(patched, rmv1alpha1.OrganizationFinalizer)
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(org, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	logger.V(2).Info("Organization's projects and namespace are gone; removed its finalizer")
	return ctrl.Result{}, nil
}

// summarize lists the first few of names, and how many more there are.
func summarize(names []string) string {
	const shown = 10
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
