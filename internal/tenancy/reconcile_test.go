package tenancy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

const acmeUID = types.UID("acme-uid")

var orgKind = rmv1alpha1.SchemeGroupVersion.WithKind("Organization")

// acme is the organization the tests reconcile: created by alice, holding
// its finalizer, at generation 3; edits change it.
func acme(edits ...func(*rmv1alpha1.Organization)) *rmv1alpha1.Organization {
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{
		Name: "acme", UID: acmeUID, Generation: 3,
		Annotations: map[string]string{rmv1alpha1.CreatorAnnotation: "alice"},
		Finalizers:  []string{rmv1alpha1.OrganizationFinalizer},
	}}
	for _, e := range edits {
		e(o)
	}
	return o
}

func withoutFinalizer(o *rmv1alpha1.Organization) { o.Finalizers = nil }
func withoutCreator(o *rmv1alpha1.Organization)   { o.Annotations = nil }
func deleted(o *rmv1alpha1.Organization)          { o.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }

// readyMessage is the Ready message of an organization whose owner is bound.
const readyMessage = "namespace organization-acme exists and the organization's creator is bound to " + rmv1alpha1.OrganizationOwnerRole + " there"

func readyStatus(o *rmv1alpha1.Organization) {
	o.Status = rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Namespace: "organization-acme", Conditions: []metav1.Condition{{
		Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: rmv1alpha1.OrganizationReasonReady,
		Message: readyMessage, ObservedGeneration: 3,
	}}}
}

// acmeNamespace is acme's namespace; edits change it.
func acmeNamespace(edits ...func(*corev1.Namespace)) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "organization-acme", UID: "ns-uid",
		Labels:          map[string]string{rmv1alpha1.OrganizationNameLabel: "acme"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(acme(), orgKind)},
	}}
	for _, e := range edits {
		e(ns)
	}
	return ns
}

// acmeBindings are the owner's bindings as the reconciler makes them.
func acmeBindings() []client.Object {
	rb, cr, crb := ownerBindings(acme(), "alice")
	return []client.Object{rb, cr, crb}
}

func condition(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: rmv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: 3}
}

// TestOrganizationReconcile: what the organization reconciler writes for each
// state it may find, the status it reports, and when it looks again.
func TestOrganizationReconcile(t *testing.T) {
	bindingWrites := []string{
		"create RoleBinding organization-acme/" + rmv1alpha1.OrganizationOwnerBinding,
		"create ClusterRole quotaplane:organization:acme",
		"create ClusterRoleBinding quotaplane:organization:acme",
	}
	reviews := []string{"review alice create organizations", "review alice claim organizations"}
	otherSubject := acmeBindings()
	otherSubject[0].(*rbacv1.RoleBinding).Subjects = []rbacv1.Subject{subject("bob")}

	for name, tc := range map[string]struct {
		cached []client.Object
		live   liveObjects
		denied bool
		fail   map[string]error
		// charged is what is still charged to the organization.
		charged []string

		wantWrites  []string
		wantStatus  *rmv1alpha1.OrganizationStatus // nil: no status written
		wantRequeue time.Duration
		wantErr     bool
	}{
		"a new organization gets its finalizer, namespace and bindings": {
			cached: []client.Object{acme(withoutFinalizer)},
			wantWrites: append(append(append([]string{"patch Organization acme", "create Namespace organization-acme"},
				bindingWrites...), reviews...), "update status of Organization acme"),
			wantStatus: &rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Namespace: "organization-acme", Conditions: []metav1.Condition{
				condition(metav1.ConditionTrue, rmv1alpha1.OrganizationReasonReady, readyMessage)}},
		},
		"not Ready until the authorizer lets the owner act": {
			cached:     append([]client.Object{acme(), acmeNamespace()}, acmeBindings()...),
			denied:     true,
			wantWrites: []string{"review alice create organizations", "update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Namespace: "organization-acme", Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonProvisioning,
					"the owner's bindings exist but do not allow create organizations/projects yet; waiting for the authorizer to see them")}},
			wantRequeue: authorizerPoll,
		},
		"a Ready organization with everything in place is left alone": {
			cached: append([]client.Object{acme(readyStatus), acmeNamespace()}, acmeBindings()...),
		},
		"no creator: nobody is bound, and Ready says so": {
			cached:     []client.Object{acme(withoutCreator), acmeNamespace()},
			wantWrites: []string{"update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Namespace: "organization-acme", Conditions: []metav1.Condition{
				condition(metav1.ConditionTrue, rmv1alpha1.OrganizationReasonReady, fmt.Sprintf(
					"namespace organization-acme exists; no creator is recorded (annotation %s), so nobody is bound as owner: bind owners to %s there yourself",
					rmv1alpha1.CreatorAnnotation, rmv1alpha1.OrganizationOwnerRole))}},
		},
		"a namespace of its name that is someone else's is a conflict": {
			cached:     []client.Object{acme()},
			live:       liveObjects{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "organization-acme"}}},
			wantWrites: []string{"update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonNamespaceConflict,
					"namespace organization-acme exists and is not this organization's (it has no controller ownerReference to Organization acme with uid acme-uid); delete it, or create the organization under another name")}},
			wantRequeue: 5 * deletionPoll,
		},
		"the namespace of a previous organization of its name is still being deleted": {
			cached: []client.Object{acme(), acmeNamespace(func(ns *corev1.Namespace) {
				ns.OwnerReferences[0].UID = "previous-uid"
				ns.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			})},
			wantWrites: []string{"update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonProvisioning,
					"namespace organization-acme of a previous organization named acme is still being deleted; waiting until it is gone")}},
			wantRequeue: deletionPoll,
		},
		"its own namespace being deleted is made again once gone": {
			cached: []client.Object{acme(), acmeNamespace(func(ns *corev1.Namespace) {
				ns.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			})},
			wantWrites: []string{"update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{ObservedGeneration: 3, Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonProvisioning,
					"namespace organization-acme is being deleted (with everything in it); it is made again once it is gone")}},
			wantRequeue: deletionPoll,
		},
		"its own namespace without the label (so not cached) is labelled again": {
			cached:     append([]client.Object{acme(readyStatus)}, acmeBindings()...),
			live:       liveObjects{acmeNamespace(func(ns *corev1.Namespace) { ns.Labels = nil })},
			wantWrites: []string{"patch Namespace organization-acme"},
		},
		"a namespace that cannot be made is retried, and Ready says why": {
			cached:     []client.Object{acme()},
			fail:       map[string]error{"create Namespace organization-acme": errors.New("the quota of namespaces is used up")},
			wantWrites: []string{"create Namespace organization-acme", "update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonProvisioning,
					"cannot create namespace organization-acme: the quota of namespaces is used up; retrying")}},
			wantErr: true,
		},
		"a binding of someone else is replaced": {
			cached: append([]client.Object{acme(readyStatus), acmeNamespace()}, otherSubject...),
			wantWrites: []string{
				"delete RoleBinding organization-acme/" + rmv1alpha1.OrganizationOwnerBinding,
				"create RoleBinding organization-acme/" + rmv1alpha1.OrganizationOwnerBinding,
			},
		},
		"a deleted organization deletes its projects, namespace and roles, and waits": {
			cached: append([]client.Object{acme(deleted),
				&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Name: "acme"}}},
				&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: "p2", DeletionTimestamp: &metav1.Time{Time: time.Unix(1, 0)}, Finalizers: []string{"x"}},
					Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Name: "acme"}}},
				&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Name: "globex"}}},
			}, acmeBindings()[1:]...),
			live: liveObjects{acmeNamespace()},
			wantWrites: []string{
				"delete Project p1", "delete Namespace organization-acme",
				"delete ClusterRoleBinding quotaplane:organization:acme", "delete ClusterRole quotaplane:organization:acme",
				"update status of Organization acme",
			},
			wantStatus: &rmv1alpha1.OrganizationStatus{Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonDeleting,
					"being deleted; waiting until these are gone: Project p1, Project p2, Namespace organization-acme")}},
			wantRequeue: deletionPoll,
		},
		"a deleted organization whose projects and namespace are gone drops its finalizer": {
			cached:     []client.Object{acme(deleted)},
			live:       liveObjects{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "organization-acme"}}}, // not its own
			wantWrites: []string{"patch Organization acme"},
		},
		"a deleted organization waits while objects are charged to it": {
			cached:     []client.Object{acme(deleted)},
			charged:    []string{"ConfigMap apps/c0 (charged to this organization by ResourceClaim apps/c0-claim)"},
			wantWrites: []string{"update status of Organization acme"},
			wantStatus: &rmv1alpha1.OrganizationStatus{Conditions: []metav1.Condition{
				condition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonDeleting,
					"being deleted; waiting until these are gone: ConfigMap apps/c0 (charged to this organization by ResourceClaim apps/c0-claim)")}},
			wantRequeue: deletionPoll,
		},
		"a deleted organization without the finalizer is left alone": {
			cached: []client.Object{acme(deleted, withoutFinalizer)},
		},
		"an organization that is gone needs nothing": {},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{fail: tc.fail, denied: tc.denied}
			r := &organizationReconciler{cache: cacheOf(tc.cached...), live: tc.live, client: rec,
				charged: func(context.Context, string) ([]string, error) { return tc.charged, nil }}
			requeue, err := r.reconcile(context.Background(), "acme")
			if (err != nil) != tc.wantErr {
				t.Errorf("reconcile returned %v; want an error: %t", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantWrites, rec.writes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			var gotStatus *rmv1alpha1.OrganizationStatus
			if rec.status != nil {
				gotStatus = &rec.status.(*rmv1alpha1.Organization).Status
			}
			if diff := cmp.Diff(tc.wantStatus, gotStatus, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("status written (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRequeue, requeue); diff != "" {
				t.Errorf("looks again after (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOrganizationReconcileMadeObjects: the namespace and bindings a new
// organization gets carry its label and controller ownerReference, and bind
// its creator.
func TestOrganizationReconcileMadeObjects(t *testing.T) {
	made := map[string]client.Object{}
	rec := &capture{recorder: &recorder{}, made: made}
	r := &organizationReconciler{cache: cacheOf(acme()), live: liveObjects{}, client: rec}
	if _, err := r.reconcile(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(acme(), orgKind)}
	label := map[string]string{rmv1alpha1.OrganizationNameLabel: "acme"}
	alice := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}
	ns := made["create Namespace organization-acme"].(*corev1.Namespace)
	if diff := cmp.Diff(metav1.ObjectMeta{Name: "organization-acme", Labels: label, OwnerReferences: owner}, ns.ObjectMeta); diff != "" {
		t.Errorf("namespace (-want +got):\n%s", diff)
	}
	rb := made["create RoleBinding organization-acme/"+rmv1alpha1.OrganizationOwnerBinding].(*rbacv1.RoleBinding)
	if diff := cmp.Diff(&rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: rmv1alpha1.OrganizationOwnerBinding, Namespace: "organization-acme", Labels: label},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rmv1alpha1.OrganizationOwnerRole},
		Subjects:   alice,
	}, rb); diff != "" {
		t.Errorf("RoleBinding (-want +got):\n%s", diff)
	}
	crb := made["create ClusterRoleBinding quotaplane:organization:acme"].(*rbacv1.ClusterRoleBinding)
	if diff := cmp.Diff(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "quotaplane:organization:acme", Labels: label, OwnerReferences: owner},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane:organization:acme"},
		Subjects:   alice,
	}, crb); diff != "" {
		t.Errorf("ClusterRoleBinding (-want +got):\n%s", diff)
	}
	cr := made["create ClusterRole quotaplane:organization:acme"].(*rbacv1.ClusterRole)
	if diff := cmp.Diff(metav1.ObjectMeta{Name: "quotaplane:organization:acme", Labels: label, OwnerReferences: owner}, cr.ObjectMeta); diff != "" {
		t.Errorf("ClusterRole (-want +got):\n%s", diff)
	}
}

// capture keeps the objects a reconcile creates.
type capture struct {
	*recorder
	made map[string]client.Object
}

func (c *capture) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.made[describe("create", obj)] = obj.DeepCopyObject().(client.Object)
	return c.recorder.Create(ctx, obj, opts...)
}

func project(name, org string, edits ...func(*rmv1alpha1.Project)) *rmv1alpha1.Project {
	p := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), Generation: 2}, Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Name: org}}}
	for _, e := range edits {
		e(p)
	}
	return p
}

// projectNamespace is the namespace at the root the controller makes for
// project p (controlled by it); owner overrides its controller's UID.
func projectNamespace(p *rmv1alpha1.Project, owner types.UID) *corev1.Namespace {
	ref := *metav1.NewControllerRef(p, rmv1alpha1.SchemeGroupVersion.WithKind("Project"))
	ref.UID = owner
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "project-" + p.Name,
		Labels: map[string]string{rmv1alpha1.OrganizationNameLabel: p.Spec.OwnerRef.Name}, OwnerReferences: []metav1.OwnerReference{ref}}}
}

// TestProjectReconcile: the project reconciler labels a project and makes
// its organization an owner once that exists, and reports it in Ready.
func TestProjectReconcile(t *testing.T) {
	owned := func(p *rmv1alpha1.Project) {
		p.Finalizers = []string{rmv1alpha1.ProjectFinalizer}
		p.Labels = map[string]string{rmv1alpha1.OrganizationNameLabel: "acme"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Organization", Name: "acme", UID: acmeUID, BlockOwnerDeletion: new(true)}}
	}
	ready := func(p *rmv1alpha1.Project) {
		p.Status = rmv1alpha1.ProjectStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{{Type: rmv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: rmv1alpha1.ProjectReasonReady, Message: "belongs to Organization acme", ObservedGeneration: 2}}}
	}
	projectCondition := func(status metav1.ConditionStatus, reason, msg string) *rmv1alpha1.ProjectStatus {
		return &rmv1alpha1.ProjectStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{
			{Type: rmv1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg, ObservedGeneration: 2}}}
	}
	for name, tc := range map[string]struct {
		cached     []client.Object
		wantWrites []string
		wantStatus *rmv1alpha1.ProjectStatus
		// wantRequeue is the delay reconcile asks for.
		wantRequeue time.Duration
	}{
		"labelled and owned once its organization exists": {
			cached:     []client.Object{acme(), project("p1", "acme")},
			wantWrites: []string{"patch Project p1", "patch Project p1", "create Namespace project-p1", "update status of Project p1"},
			wantStatus: projectCondition(metav1.ConditionTrue, rmv1alpha1.ProjectReasonReady, "belongs to Organization acme"),
		},
		"in place and Ready: left alone": {
			cached: []client.Object{acme(), project("p1", "acme", owned, ready), projectNamespace(project("p1", "acme"), "p1-uid")},
		},
		"its namespace is someone else's": {
			cached: []client.Object{acme(), project("p1", "acme", owned, ready), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "project-p1",
				Labels: map[string]string{rmv1alpha1.OrganizationNameLabel: "acme"}}}},
			wantWrites: []string{"update status of Project p1"},
			wantStatus: projectCondition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonNamespaceConflict,
				"namespace project-p1 exists and is not this project's (it has no controller ownerReference to Project p1 with uid p1-uid); delete it, or create the project under another name"),
		},
		"a previous project's namespace is still there": {
			cached:     []client.Object{acme(), project("p1", "acme", owned, ready), projectNamespace(project("p1", "acme"), "old-uid")},
			wantWrites: []string{"update status of Project p1"},
			wantStatus: projectCondition(metav1.ConditionFalse, rmv1alpha1.OrganizationReasonProvisioning,
				"namespace project-p1 of a previous project named p1 is still being deleted; waiting until it is gone"),
			wantRequeue: namespaceWait,
		},
		"its organization does not exist": {
			cached:     []client.Object{project("p1", "acme")},
			wantWrites: []string{"patch Project p1", "update status of Project p1"},
			wantStatus: projectCondition(metav1.ConditionFalse, rmv1alpha1.ProjectReasonOrganizationNotFound,
				"Organization acme named by spec.ownerRef does not exist; create it, or delete this project"),
		},
		"its organization is being deleted": {
			cached:     []client.Object{acme(deleted), project("p1", "acme", owned, ready)},
			wantWrites: []string{"update status of Project p1"},
			wantStatus: projectCondition(metav1.ConditionFalse, rmv1alpha1.ProjectReasonOrganizationDeleting,
				"Organization acme is being deleted, and its projects with it"),
		},
		"a deleted project is left alone": {
			cached: []client.Object{acme(), project("p1", "acme", func(p *rmv1alpha1.Project) {
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
				p.Finalizers = []string{"x"}
			})},
		},
		"a project that is gone needs nothing": {
			cached: []client.Object{acme()},
		},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			r := &projectReconciler{cache: cacheOf(tc.cached...), client: rec}
			requeue, err := r.reconcile(context.Background(), "p1")
			if err != nil || requeue != tc.wantRequeue {
				t.Errorf("reconcile returned %v, %v; want no error and a delay of %v", requeue, err, tc.wantRequeue)
			}
			if diff := cmp.Diff(tc.wantWrites, rec.writes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			var gotStatus *rmv1alpha1.ProjectStatus
			if rec.status != nil {
				p := rec.status.(*rmv1alpha1.Project)
				gotStatus = &p.Status
				if tc.wantStatus != nil && tc.wantStatus.Conditions[0].Status == metav1.ConditionTrue {
					want := project("p1", "acme", owned)
					if diff := cmp.Diff(want.ObjectMeta, p.ObjectMeta); diff != "" {
						t.Errorf("the project's label and owner (-want +got):\n%s", diff)
					}
				}
			}
			if diff := cmp.Diff(tc.wantStatus, gotStatus, cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("status written (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProjectFinalizer: a deleted project keeps its finalizer, and says why,
// while objects are charged to it; once none is, the finalizer goes.
func TestProjectFinalizer(t *testing.T) {
	deletedProject := func(p *rmv1alpha1.Project) {
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		p.Finalizers = []string{rmv1alpha1.ProjectFinalizer}
	}
	for name, tc := range map[string]struct {
		charged     []string
		wantWrites  []string
		wantRequeue bool
	}{
		"charged: waits, naming what": {charged: []string{"Widget apps/w1 (charged to this project by ResourceClaim apps/c1)"}, wantWrites: []string{"update status of Project p1"}, wantRequeue: true},
		"nothing charged: let go":     {wantWrites: []string{"patch Project p1"}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			r := &projectReconciler{cache: cacheOf(acme(), project("p1", "acme", deletedProject)), client: rec,
				charged: func(context.Context, string) ([]string, error) { return tc.charged, nil }}
			requeue, err := r.reconcile(context.Background(), "p1")
			if err != nil || (requeue != 0) != tc.wantRequeue {
				t.Errorf("reconcile returned %v, %v; want a requeue: %v", requeue, err, tc.wantRequeue)
			}
			if diff := cmp.Diff(tc.wantWrites, rec.writes, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if tc.wantRequeue {
				p := rec.status.(*rmv1alpha1.Project)
				if c := meta.FindStatusCondition(p.Status.Conditions, rmv1alpha1.ConditionReady); c == nil || c.Reason != rmv1alpha1.ProjectReasonDeleting || !strings.Contains(c.Message, "Widget apps/w1") {
					t.Errorf("the condition does not say what the project waits for: %+v", c)
				}
			}
		})
	}
}
