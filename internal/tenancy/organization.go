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
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// deletionPoll is how often a deleted organization checks that its projects
// and namespace are gone, besides the events that say so.
const deletionPoll = 2 * time.Second

// organizationReconciler gives an Organization its namespace, its owner's
// bindings, and removes them (with its projects) when it is deleted.
type organizationReconciler struct {
	// cache reads the term's informers.
	cache *stores
	// live reads namespaces and roles the cache does not hold (those
	// without the organization label), to tell a conflicting object from a
	// missing one.
	live getter
	// client writes through the API server.
	client writer
	// charged lists what is still charged to an organization: the objects
	// of the ResourceClaims whose consumer it is, wherever they live. Its
	// deletion waits until there are none, so that a new organization of the
	// same name never inherits them. Nil: nothing is checked.
	charged func(ctx context.Context, org string) ([]string, error)
}

// getter reads one object from the API server.
type getter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// writer is what the reconcilers write with (a client.Client).
type writer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
	Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error
	Status() client.SubResourceWriter
}

// ownerRoleName names the ClusterRole and ClusterRoleBinding that let an
// organization's creator read and charge it and create projects. The colons
// keep it apart from the roles quotaplane ships.
func ownerRoleName(org string) string { return "quotaplane:organization:" + org }

// reconcile makes the organization's namespace and bindings exist, or, for a
// deleted organization, makes its projects and namespace not exist. It
// returns when to look again if no event will say so.
func (r *organizationReconciler) reconcile(ctx context.Context, name string) (time.Duration, error) {
	org := &rmv1alpha1.Organization{}
	if err := r.cache.get(client.ObjectKey{Name: name}, org); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("organization", klog.KObj(org)))
	if org.DeletionTimestamp != nil {
		return r.finalize(ctx, org)
	}
	if !controllerutil.ContainsFinalizer(org, rmv1alpha1.OrganizationFinalizer) {
		patched := org.DeepCopy()
		controllerutil.AddFinalizer(patched, rmv1alpha1.OrganizationFinalizer)
		if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(org, client.MergeFromWithOptimisticLock{})); err != nil {
			return 0, fmt.Errorf("adding finalizer: %w", err)
		}
		org = patched
	}

	status := org.Status.DeepCopy()
	ready := metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: rmv1alpha1.OrganizationReasonReady,
		Message: fmt.Sprintf("namespace %s exists and the organization's creator is bound to %s there", rmv1alpha1.OrganizationNamespace(org.Name), rmv1alpha1.OrganizationOwnerRole)}
	var requeue time.Duration
	var rerr error
	ns, waitMsg, conflict, err := r.ensureNamespace(ctx, org)
	status.Namespace = ""
	switch {
	case err != nil:
		ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, fmt.Sprintf("cannot create namespace %s: %v; retrying", rmv1alpha1.OrganizationNamespace(org.Name), err))
		rerr = err
	case conflict != "":
		ready = notReady(rmv1alpha1.OrganizationReasonNamespaceConflict, conflict)
		requeue = deletionPoll * 5
	case waitMsg != "":
		ready = notReady(rmv1alpha1.OrganizationReasonProvisioning, waitMsg)
		requeue = deletionPoll
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
				requeue = authorizerPoll
			}
		}
	}
	ready.ObservedGeneration = org.Generation
	meta.SetStatusCondition(&status.Conditions, ready)
	if rerr == nil {
		status.ObservedGeneration = org.Generation
	}
	if err := r.writeStatus(ctx, org, status); err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	return requeue, nil
}

// authorizerPoll is how often a new organization checks that its owner's
// bindings are in force.
const authorizerPoll = 100 * time.Millisecond

// ownerCannot asks the authorizer, as the organization's creator, the two
// questions its bindings answer: creating projects in it (docs/authorization.md)
// and charging it. It returns the first that is not allowed yet, or "".
func (r *organizationReconciler) ownerCannot(ctx context.Context, org *rmv1alpha1.Organization) (string, error) {
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
		if err := r.client.Create(ctx, sar); err != nil {
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

func (r *organizationReconciler) writeStatus(ctx context.Context, org *rmv1alpha1.Organization, status *rmv1alpha1.OrganizationStatus) error {
	if equality.Semantic.DeepEqual(&org.Status, status) {
		return nil
	}
	updated := org.DeepCopy()
	updated.Status = *status
	if err := r.client.Status().Update(ctx, updated); err != nil {
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
func (r *organizationReconciler) ensureNamespace(ctx context.Context, org *rmv1alpha1.Organization) (ns *corev1.Namespace, wait, conflict string, err error) {
	name := rmv1alpha1.OrganizationNamespace(org.Name)
	ns = &corev1.Namespace{}
	err = r.cache.get(client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		// Not labelled (so not cached), or missing.
		err = r.live.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	if apierrors.IsNotFound(err) {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{rmv1alpha1.OrganizationNameLabel: org.Name},
		}}
		if err := controllerutil.SetControllerReference(org, ns, scheme); err != nil {
			return nil, "", "", err
		}
		if err := r.client.Create(ctx, ns); err != nil {
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
		if err := r.client.Patch(ctx, patched, client.MergeFrom(ns)); err != nil {
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
func (r *organizationReconciler) ensureBindings(ctx context.Context, org *rmv1alpha1.Organization) error {
	who := creator(org)
	if who == "" {
		return nil
	}
	rb, cr, crb := ownerBindings(org, who)
	if err := r.apply(ctx, rb, &rbacv1.RoleBinding{}, func(have client.Object) bool {
		h := have.(*rbacv1.RoleBinding)
		return equality.Semantic.DeepEqual(h.Subjects, rb.Subjects) && h.RoleRef == rb.RoleRef && h.Labels[rmv1alpha1.OrganizationNameLabel] == org.Name
	}); err != nil {
		return fmt.Errorf("RoleBinding %s/%s: %w", rb.Namespace, rb.Name, err)
	}
	if err := r.apply(ctx, cr, &rbacv1.ClusterRole{}, func(have client.Object) bool {
		h := have.(*rbacv1.ClusterRole)
		return equality.Semantic.DeepEqual(h.Rules, cr.Rules) && ownedBy(h, org)
	}); err != nil {
		return fmt.Errorf("ClusterRole %s: %w", cr.Name, err)
	}
	if err := r.apply(ctx, crb, &rbacv1.ClusterRoleBinding{}, func(have client.Object) bool {
		h := have.(*rbacv1.ClusterRoleBinding)
		return equality.Semantic.DeepEqual(h.Subjects, crb.Subjects) && h.RoleRef == crb.RoleRef && ownedBy(h, org)
	}); err != nil {
		return fmt.Errorf("ClusterRoleBinding %s: %w", crb.Name, err)
	}
	return nil
}

// ownerBindings are the objects that bind who as the organization's owner.
func ownerBindings(org *rmv1alpha1.Organization, who string) (*rbacv1.RoleBinding, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	labels := map[string]string{rmv1alpha1.OrganizationNameLabel: org.Name}
	owner := *metav1.NewControllerRef(org, rmv1alpha1.SchemeGroupVersion.WithKind("Organization"))
	subjects := []rbacv1.Subject{subject(who)}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: rmv1alpha1.OrganizationOwnerBinding, Namespace: rmv1alpha1.OrganizationNamespace(org.Name), Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rmv1alpha1.OrganizationOwnerRole},
		Subjects:   subjects,
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
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ownerRoleName(org.Name), Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   subjects,
	}
	return rb, cr, crb
}

func ownedBy(o client.Object, org *rmv1alpha1.Organization) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == org.UID
}

// apply creates want, or replaces an existing object of its name that
// differs from it (same reports whether have matches). A roleRef cannot be
// changed in place: a binding that differs there is deleted and created
// again.
func (r *organizationReconciler) apply(ctx context.Context, want, have client.Object, same func(client.Object) bool) error {
	err := r.cache.get(client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		err = r.client.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Not in the cache: not labelled as an organization's, or just made.
		err = r.live.Get(ctx, client.ObjectKeyFromObject(want), have)
	}
	if err != nil {
		return err
	}
	if same(have) {
		return nil
	}
	// Replace: the old object may be a previous organization's of the same
	// name, or hold another roleRef.
	if err := r.client.Delete(ctx, have, client.Preconditions{UID: ptr.To(have.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return r.client.Create(ctx, want)
}

// finalize deletes the organization's projects, its namespace and its
// cluster-wide bindings, and drops the finalizer once they are gone and no
// object anywhere is charged to the organization any more (docs/tenancy.md).
func (r *organizationReconciler) finalize(ctx context.Context, org *rmv1alpha1.Organization) (time.Duration, error) {
	if !controllerutil.ContainsFinalizer(org, rmv1alpha1.OrganizationFinalizer) {
		return 0, nil
	}
	logger := klog.FromContext(ctx)
	var waiting []string

	projects, err := r.cache.projectsOf(org.Name)
	if err != nil {
		return 0, err
	}
	for _, p := range projects {
		waiting = append(waiting, "Project "+p.Name)
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.client.Delete(ctx, p, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("deleting Project %s: %w", p.Name, err)
		}
		logger.V(2).Info("Deleted a project of the deleted organization", "project", p.Name)
	}

	nsName := rmv1alpha1.OrganizationNamespace(org.Name)
	ns := &corev1.Namespace{}
	err = r.live.Get(ctx, client.ObjectKey{Name: nsName}, ns)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return 0, err
	case ownedBy(ns, org):
		waiting = append(waiting, "Namespace "+nsName)
		if ns.DeletionTimestamp == nil {
			if err := r.client.Delete(ctx, ns, client.Preconditions{UID: ptr.To(ns.UID)}); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("deleting namespace %s: %w", nsName, err)
			}
			logger.V(2).Info("Deleted the namespace of the deleted organization", "namespace", nsName)
		}
	}
	for _, o := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{}} {
		err := r.cache.get(client.ObjectKey{Name: ownerRoleName(org.Name)}, o)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if !ownedBy(o, org) {
			continue
		}
		if err := r.client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}

	if r.charged != nil {
		charged, err := r.charged(ctx, org.Name)
		if err != nil {
			return 0, err
		}
		waiting = append(waiting, charged...)
	}
	if len(waiting) > 0 {
		status := org.Status.DeepCopy()
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: rmv1alpha1.OrganizationReasonDeleting, ObservedGeneration: org.Generation,
			Message: "being deleted; waiting until these are gone: " + summarize(waiting)})
		if err := r.writeStatus(ctx, org, status); err != nil {
			return 0, err
		}
		return deletionPoll, nil
	}
	patched := org.DeepCopy()
	controllerutil.RemoveFinalizer(patched, rmv1alpha1.OrganizationFinalizer)
	if err := r.client.Patch(ctx, patched, client.MergeFromWithOptions(org, client.MergeFromWithOptimisticLock{})); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	logger.V(2).Info("Organization's projects and namespace are gone; removed its finalizer")
	return 0, nil
}

// summarize lists the first few of names, and how many more there are.
func summarize(names []string) string {
	const shown = 10
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}
