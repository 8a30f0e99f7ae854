package claimguard

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/admissiontest"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
)

const systemNamespace = "quotaplane-system"

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	claimsGVR   = quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims")
	alice       = &user.DefaultInfo{Name: "alice"}
	server      = &user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}
)

// mayClaim lets alice, and only alice, charge any consumer.
var mayClaim = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser().GetName() == "alice" && a.GetVerb() == "claim" {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC rule", nil
})

// admitted is a claim made at admission for Deployment team-a/web (uid u1).
func admitted() *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c1",
			Annotations: map[string]string{
				quotav1alpha1.AnnotationResourceUID: "u1", quotav1alpha1.AnnotationResource: "deployments.v1.apps",
				quotav1alpha1.AnnotationPolicy: "per-deployment", quotav1alpha1.AnnotationPolicyGeneration: "1",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "u1"}},
		},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p1"},
			ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: "apps", Kind: "Deployment", Namespace: "team-a", Name: "web"},
		},
	}
}

// newGuard is the plugin as serve builds it: given the root's client
// (reads), the clients of the control planes (planes, by plane; a plane
// missing answers NotFound), and az.
func newGuard(t *testing.T, engineInProcess bool, reads *admissiontest.Reads, planeReads map[string]*admissiontest.Reads, az authorizer.Authorizer) admission.Interface {
	t.Helper()
	plugins := admission.NewPlugins()
	Register(plugins, systemNamespace, engineInProcess)
	clients := func(p planes.Plane) (dynamic.Interface, error) {
		if r, ok := planeReads[p.String()]; ok {
			return r, nil
		}
		return &admissiontest.Reads{}, nil
	}
	p, err := plugins.InitPlugin(PluginName, nil, admission.PluginInitializers{given{reads, az}, planesGiven(clients)})
	if err != nil {
		t.Fatalf("initializing %s: %v", PluginName, err)
	}
	return p
}

// given gives a plugin the root's client and the authorizer, as the
// server's initializer does.
type given struct {
	client     dynamic.Interface
	authorizer authorizer.Authorizer
}

func (g given) Initialize(p admission.Interface) {
	if w, ok := p.(initializer.WantsDynamicClient); ok {
		w.SetDynamicClient(g.client)
	}
	if w, ok := p.(initializer.WantsAuthorizer); ok {
		w.SetAuthorizer(g.authorizer)
	}
}

// planesGiven gives a plugin clients of the control planes.
type planesGiven plugininit.PlaneClients

func (c planesGiven) Initialize(p admission.Interface) {
	if w, ok := p.(plugininit.WantsPlaneClients); ok {
		w.SetPlaneClients(plugininit.PlaneClients(c))
	}
}

func deployment(uid string, deleting bool) *unstructured.Unstructured {
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	d.SetNamespace("team-a")
	d.SetName("web")
	d.SetUID(types.UID(uid))
	if deleting {
		now := metav1.Now()
		d.SetDeletionTimestamp(&now)
	}
	return d
}

func toUnstructured(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	if obj == nil {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: u}
}

func TestValidate(t *testing.T) {
	unannotated := admitted()
	unannotated.Annotations = nil
	repolicied := admitted()
	repolicied.Annotations[quotav1alpha1.AnnotationPolicy] = "other"
	relabelled := admitted()
	relabelled.Labels = map[string]string{"team": "a"}
	orphaned := admitted()
	orphaned.OwnerReferences = nil
	unannotatedOrphaned := unannotated.DeepCopy()
	unannotatedOrphaned.OwnerReferences = nil

	marked := admitted()
	marked.Annotations[planes.Annotation] = "projects/p1"
	labelled := admitted()
	labelled.Labels = map[string]string{members.Label: "east"}

	const (
		holds  = `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim team-a/c1 is refused: `
		cut    = `resourceclaims.quota.miloapis.com "c1" is forbidden: updating (this update `
		stored = "it holds the quota of Deployment team-a/web (uid u1), which is still stored at the root; " +
			"nobody, the platform's controllers included, removes or cuts the claim of a stored object: delete that object to release its quota (its claim is released with it)"
		marksSay = "the annotation quota.miloapis.com/control-plane and the label quota.miloapis.com/cluster say where the claim's object is stored (a control plane, a member cluster) " +
			"and are written only by the quota engine with the claim: nobody adds, changes or removes them. Leave them as they are; to release the claim, delete its object"
	)
	cases := map[string]struct {
		resource    schema.GroupVersionResource
		namespace   string
		name        string
		subresource string
		op          admission.Operation
		obj, old    runtime.Object
		user        user.Info
		objects     []*unstructured.Unstructured
		readErr     error
		noEngine    bool
		wantErr     string
	}{
		"create: the creator may charge the consumer": {
			resource: claimsGVR, op: admission.Create, obj: admitted(), user: alice,
		},
		"create: the creator may not charge the consumer": {
			resource: claimsGVR, op: admission.Create, obj: admitted(), user: &user.DefaultInfo{Name: "bob"},
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: user "bob" may not charge quota of Project p1: it needs verb "claim" on ` +
				`projects.resourcemanager.miloapis.com named p1 cluster-wide (no RBAC rule); ask an owner of p1 for it (a role with that verb and resourceNames: [p1]), ` +
				`or bind quotaplane-owning-service to a service that charges every consumer (docs/authorization.md)`,
		},
		"create: serve itself is not asked": {
			resource: claimsGVR, op: admission.Create, obj: admitted(), user: server,
		},
		"status: only the engine decides": {
			resource: claimsGVR, subresource: "status", op: admission.Update, obj: admitted(), old: admitted(), user: alice,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: the status of a ResourceClaim is its quota decision and is written by the quota engine only; nothing else may set it`,
		},
		"status: the engine itself": {
			resource: claimsGVR, subresource: "status", op: admission.Update, obj: admitted(), old: admitted(), user: server,
		},
		"status: without the engine in process, left to RBAC": {
			resource: claimsGVR, subresource: "status", op: admission.Update, obj: admitted(), old: admitted(), user: alice, noEngine: true,
		},
		"update: an annotation naming the object changes": {
			resource: claimsGVR, op: admission.Update, obj: repolicied, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
			wantErr: cut + "changes its annotation quota.miloapis.com/policy) ResourceClaim team-a/c1 is refused: " + stored,
		},
		"update: an annotation naming the object changes once it is gone": {
			resource: claimsGVR, op: admission.Update, obj: repolicied, old: admitted(), user: alice,
		},
		"update: the ownerReference to the object is removed": {
			resource: claimsGVR, op: admission.Update, obj: orphaned, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
			wantErr: cut + "removes its ownerReference to that object (as kubectl delete --cascade=orphan would)) ResourceClaim team-a/c1 is refused: " + stored,
		},
		"update: the garbage collector removes the ownerReference while the object exists": {
			resource: claimsGVR, op: admission.Update, obj: orphaned, old: admitted(), user: server,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
			wantErr: cut + "removes its ownerReference to that object (as kubectl delete --cascade=orphan would)) ResourceClaim team-a/c1 is refused: " + stored,
		},
		"update: the garbage collector orphans it as its object is deleted": {
			resource: claimsGVR, op: admission.Update, obj: orphaned, old: admitted(), user: server,
			objects: []*unstructured.Unstructured{deployment("u1", true)},
		},
		"update: a label is added": {
			resource: claimsGVR, op: admission.Update, obj: relabelled, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
		},
		"update: a claim not made at admission": {
			resource: claimsGVR, op: admission.Update, obj: unannotatedOrphaned, old: unannotated, user: alice,
		},
		"update: the control-plane mark added, by the server": {
			resource: claimsGVR, op: admission.Update, obj: marked, old: admitted(), user: server,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: updating ResourceClaim team-a/c1 is refused: this update adds the annotation quota.miloapis.com/control-plane=projects/p1; ` + marksSay,
		},
		"update: the status, with the cluster label removed": {
			resource: claimsGVR, subresource: "status", op: admission.Update, obj: admitted(), old: labelled, user: server,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: updating ResourceClaim team-a/c1 is refused: this update removes its label quota.miloapis.com/cluster=east; ` + marksSay,
		},
		"delete: the object exists": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
			wantErr: holds + stored,
		},
		"delete: the object is gone": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: alice,
		},
		"delete: an object of that name with another uid": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u2", false)},
		},
		"delete: the object is being deleted": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", true)},
		},
		"delete: the object cannot be read": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: alice, readErr: errors.New("connection refused"),
			wantErr: "Internal error occurred: deleting ResourceClaim team-a/c1: checking whether its object Deployment team-a/web (uid u1) is still stored at the root: " +
				"reading the CustomResourceDefinition of deployments.apps: connection refused; retry in a moment",
		},
		"delete: by the garbage collector while the object exists": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: server,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
			wantErr: holds + stored,
		},
		"delete: by the garbage collector once the object is gone": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: server,
		},
		"delete: a claim not made at admission": {
			resource: claimsGVR, op: admission.Delete, old: unannotated, user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
		},
		"seal key: edited by a user": {
			resource: corev1.SchemeGroupVersion.WithResource("secrets"), namespace: systemNamespace, name: admit.SealSecretName, op: admission.Update, user: alice,
			wantErr: `secrets "` + admit.SealSecretName + `" is forbidden: the Secret ` + systemNamespace + "/" + admit.SealSecretName + ` holds the key that seals the quota engine's decisions; only the engine writes it`,
		},
		"seal key: created": {
			resource: corev1.SchemeGroupVersion.WithResource("secrets"), namespace: systemNamespace, name: admit.SealSecretName, op: admission.Create, user: alice,
		},
		"seal key: without the engine in process": {
			resource: corev1.SchemeGroupVersion.WithResource("secrets"), namespace: systemNamespace, name: admit.SealSecretName, op: admission.Delete, user: alice, noEngine: true,
		},
		"seal key's name in another namespace": {
			resource: corev1.SchemeGroupVersion.WithResource("secrets"), namespace: "team-a", name: admit.SealSecretName, op: admission.Delete, user: alice,
		},
		"ledger: deleted by a user": {
			resource: corev1.SchemeGroupVersion.WithResource("configmaps"), namespace: systemNamespace, name: admit.LedgerName, op: admission.Delete, user: alice,
			wantErr: `configmaps "` + admit.LedgerName + `" is forbidden: the ConfigMap ` + systemNamespace + "/" + admit.LedgerName +
				` is the quota engine's decision ledger and fence; only the engine writes it (deleting or editing it could let a deposed engine replica decide again)`,
		},
		"ledger: written by the engine": {
			resource: corev1.SchemeGroupVersion.WithResource("configmaps"), namespace: systemNamespace, name: admit.LedgerName, op: admission.Update, user: server,
		},
		"another ConfigMap": {
			resource: corev1.SchemeGroupVersion.WithResource("configmaps"), namespace: systemNamespace, name: "settings", op: admission.Delete, user: alice,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reads := &admissiontest.Reads{Objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{deployments: tc.objects}, Err: tc.readErr}
			p := newGuard(t, !tc.noEngine, reads, nil, mayClaim)
			ns, objName := tc.namespace, tc.name
			if tc.resource == claimsGVR {
				ns, objName = "team-a", "c1"
			}
			a := admission.NewAttributesRecord(toUnstructured(t, tc.obj), toUnstructured(t, tc.old), schema.GroupVersionKind{}, ns, objName,
				tc.resource, tc.subresource, tc.op, nil, false, tc.user)
			gotErr := ""
			if err := p.(admission.ValidationInterface).Validate(context.Background(), a, nil); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// central is a claim, in namespace central, for Deployment team-a/web: a
// claim whose object lives elsewhere.
func central() *quotav1alpha1.ResourceClaim {
	c := admitted()
	c.Namespace, c.Name, c.OwnerReferences = "central", "c1", nil
	return c
}

// TestNoNamespaceDeletionReleasesAnObjectElsewhere: deleting the namespace
// of claims whose objects live elsewhere and exist is refused, naming them;
// serve's own controllers may not delete such a claim either (the namespace
// controller emptying a terminating namespace), but may when its object is
// gone, and may delete a claim beside its object (the garbage collector).
func TestNoNamespaceDeletionReleasesAnObjectElsewhere(t *testing.T) {
	namespaces := corev1.SchemeGroupVersion.WithResource("namespaces")
	stored := func(t *testing.T, c *quotav1alpha1.ResourceClaim) *unstructured.Unstructured {
		return toUnstructured(t, c).(*unstructured.Unstructured)
	}
	cases := map[string]struct {
		resource  schema.GroupVersionResource
		old       *quotav1alpha1.ResourceClaim // the claim deleted, or stored in the namespace deleted
		objectNow bool
		wantErr   string
	}{
		"namespace with a live object's claim": {resource: namespaces, old: central(), objectNow: true,
			wantErr: `namespaces "central" is forbidden: namespace central holds the ResourceClaims of 1 objects that live outside it and are still stored (Deployment team-a/web (uid u1) at the root); deleting it would release their quota while they stay: delete those objects first (their claims go with them), then the namespace`},
		"namespace whose objects are gone": {resource: namespaces, old: central()},
		"namespace holding a claim beside its object": {resource: namespaces, old: func() *quotav1alpha1.ResourceClaim {
			c := admitted()
			c.Namespace = "central"
			c.Spec.ResourceRef.Namespace = "central"
			return c
		}(), objectNow: true},
		"the server deleting a live object's claim elsewhere": {resource: claimsGVR, old: central(), objectNow: true,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim central/c1 is refused: it holds the quota of Deployment team-a/web (uid u1), which is still stored at the root; ` +
				"nobody, the platform's controllers included, removes or cuts the claim of a stored object: delete that object to release its quota (its claim is released with it)"},
		"the server deleting it once its object is gone": {resource: claimsGVR, old: central()},
		"the server deleting a claim beside its live object": {resource: claimsGVR, old: admitted(), objectNow: true,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim team-a/c1 is refused: it holds the quota of Deployment team-a/web (uid u1), which is still stored at the root; ` +
				"nobody, the platform's controllers included, removes or cuts the claim of a stored object: delete that object to release its quota (its claim is released with it)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objects := map[schema.GroupVersionResource][]*unstructured.Unstructured{claimsGVR: {stored(t, tc.old)}}
			if tc.objectNow {
				objects[deployments] = []*unstructured.Unstructured{deployment("u1", false)}
			}
			p := newGuard(t, true, &admissiontest.Reads{Objects: objects}, nil, mayClaim)
			var a admission.Attributes
			if tc.resource == namespaces {
				a = admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "", tc.old.Namespace, namespaces, "", admission.Delete, nil, false, alice)
			} else {
				a = admission.NewAttributesRecord(nil, toUnstructured(t, tc.old), schema.GroupVersionKind{}, tc.old.Namespace, tc.old.Name, claimsGVR, "", admission.Delete, nil, false, server)
			}
			gotErr := ""
			if err := p.(admission.ValidationInterface).Validate(context.Background(), a, nil); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// inPlane is a claim, at the root in project p1's quota namespace, for
// Secret default/s0 (uid u1) of project p1's control plane.
func inPlane() *quotav1alpha1.ResourceClaim {
	c := admitted()
	c.Namespace, c.OwnerReferences = "project-p1", nil
	c.Annotations[planes.Annotation] = "projects/p1"
	c.Annotations[quotav1alpha1.AnnotationResource] = "secrets.v1."
	c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{Kind: "Secret", Namespace: "default", Name: "s0"}
	return c
}

// ofCluster is a claim of member cluster east's Secret default/s0.
func ofCluster() *quotav1alpha1.ResourceClaim {
	c := inPlane()
	c.Namespace = "cluster-east"
	delete(c.Annotations, planes.Annotation)
	c.Labels = map[string]string{members.Label: "east"}
	return c
}

func object(gvk schema.GroupVersionKind, ns, name, uid string, deleting bool) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetGroupVersionKind(gvk)
	o.SetNamespace(ns)
	o.SetName(name)
	o.SetUID(types.UID(uid))
	if deleting {
		now := metav1.Now()
		o.SetDeletionTimestamp(&now)
	}
	return o
}

// TestClaimsOfObjectsElsewhere: a control plane's claim is judged by its
// object in the plane (its owner gone or being deleted: the plane holds
// nothing); a member cluster's claim by who may release that cluster's
// claims. Every requester alike, serve itself and system:masters included.
func TestClaimsOfObjectsElsewhere(t *testing.T) {
	secrets := corev1.SchemeGroupVersion.WithResource("secrets")
	projects := schema.GroupVersionResource{Group: planes.Group, Version: planes.Version, Resource: "projects"}
	secret := func(uid string, deleting bool) *unstructured.Unstructured {
		return object(corev1.SchemeGroupVersion.WithKind("Secret"), "default", "s0", uid, deleting)
	}
	project := func(deleting bool) *unstructured.Unstructured {
		return object(schema.GroupVersionKind{Group: planes.Group, Version: planes.Version, Kind: "Project"}, "", "p1", "p-uid", deleting)
	}
	admin := &user.DefaultInfo{Name: "root-admin", Groups: []string{user.SystemPrivilegedGroup}}
	webhook := &user.DefaultInfo{Name: "system:serviceaccount:cluster-west:webhook"}
	// The authorizer: system:masters may anything; the webhook may release
	// west's claims only.
	az := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		for _, g := range a.GetUser().GetGroups() {
			if g == user.SystemPrivilegedGroup {
				return authorizer.DecisionAllow, "", nil
			}
		}
		if a.GetUser().GetName() == webhook.Name && a.GetVerb() == members.VerbRelease && a.GetResource() == members.Resource &&
			a.GetName() == "west" && a.GetNamespace() == "cluster-west" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no RBAC rule", nil
	})
	inPlaneStored := "it holds the quota of Secret default/s0 (uid u1), which is still stored in control plane projects/p1; " +
		"nobody, the platform's controllers included, removes or cuts the claim of a stored object: delete that object to release its quota (its claim is released with it)"
	orphaned := func(c *quotav1alpha1.ResourceClaim) *quotav1alpha1.ResourceClaim {
		c.Spec.ResourceRef.Name = "other"
		return c
	}
	cases := map[string]struct {
		op        admission.Operation
		obj, old  *quotav1alpha1.ResourceClaim
		user      user.Info
		root      []*unstructured.Unstructured // projects and secrets at the root
		plane     []*unstructured.Unstructured // secrets in projects/p1
		planeErr  error
		namespace bool // delete the claim's namespace instead
		wantErr   string
	}{
		"plane: a user deletes the claim of a live object": {
			op: admission.Delete, old: inPlane(), user: alice, root: []*unstructured.Unstructured{project(false)}, plane: []*unstructured.Unstructured{secret("u1", false)},
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim project-p1/c1 is refused: ` + inPlaneStored,
		},
		"plane: system:masters deletes it": {
			op: admission.Delete, old: inPlane(), user: admin, root: []*unstructured.Unstructured{project(false)}, plane: []*unstructured.Unstructured{secret("u1", false)},
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim project-p1/c1 is refused: ` + inPlaneStored,
		},
		"plane: serve itself deletes it": {
			op: admission.Delete, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(false)}, plane: []*unstructured.Unstructured{secret("u1", false)},
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim project-p1/c1 is refused: ` + inPlaneStored,
		},
		"plane: an object of that name at the root does not count": {
			op: admission.Delete, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(false), secret("u1", false)},
		},
		"plane: the object is gone from the plane": {
			op: admission.Delete, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(false)},
		},
		"plane: the object is being deleted": {
			op: admission.Delete, old: inPlane(), user: alice, root: []*unstructured.Unstructured{project(false)}, plane: []*unstructured.Unstructured{secret("u1", true)},
		},
		"plane: the owner is being deleted": {
			op: admission.Delete, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(true)}, plane: []*unstructured.Unstructured{secret("u1", false)},
		},
		"plane: the owner is gone": {
			op: admission.Delete, old: inPlane(), user: server, plane: []*unstructured.Unstructured{secret("u1", false)},
		},
		"plane: the plane cannot be read": {
			op: admission.Delete, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(false)}, planeErr: errors.New("the control plane is not ready"),
			wantErr: "Internal error occurred: deleting ResourceClaim project-p1/c1: checking whether its object Secret default/s0 (uid u1) is still stored in control plane projects/p1: " +
				"the control plane is not ready; retry in a moment",
		},
		"plane: the plane answers 404 naming no object": {
			op: admission.Delete, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(false)},
			planeErr: &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: "the control plane of Project p1 is being removed with it"}},
			wantErr: "Internal error occurred: deleting ResourceClaim project-p1/c1: checking whether its object Secret default/s0 (uid u1) is still stored in control plane projects/p1: " +
				"the control plane of Project p1 is being removed with it; retry in a moment",
		},
		"plane: the resourceRef changed while the object is live": {
			op: admission.Update, old: inPlane(), obj: orphaned(inPlane()), user: admin, root: []*unstructured.Unstructured{project(false)}, plane: []*unstructured.Unstructured{secret("u1", false)},
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: updating (this update changes its spec.resourceRef (the object it charges for)) ResourceClaim project-p1/c1 is refused: ` + inPlaneStored,
		},
		"plane: the namespace of a live object's claim": {
			namespace: true, old: inPlane(), user: admin, root: []*unstructured.Unstructured{project(false)}, plane: []*unstructured.Unstructured{secret("u1", false)},
			wantErr: `namespaces "project-p1" is forbidden: namespace project-p1 holds the ResourceClaims of 1 objects that live outside it and are still stored (Secret default/s0 (uid u1) in control plane projects/p1); ` +
				"deleting it would release their quota while they stay: delete those objects first (their claims go with them), then the namespace",
		},
		"plane: the namespace once the owner is being deleted": {
			namespace: true, old: inPlane(), user: server, root: []*unstructured.Unstructured{project(true)}, plane: []*unstructured.Unstructured{secret("u1", false)},
		},
		"member: deleted by another cluster's webhook": {
			op: admission.Delete, old: ofCluster(), user: webhook,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: deleting ResourceClaim cluster-east/c1 is refused: it holds the quota of Secret default/s0 (uid u1) in member cluster east, ` +
				`which the quota plane cannot look up; only that cluster's webhook releases it, and user "system:serviceaccount:cluster-west:webhook" may not: ` +
				`it needs verb "release" on clusters.quota.miloapis.com named east in namespace cluster-east (no RBAC rule). ` +
				"Delete the object in cluster east (its webhook releases the claim), or bind ClusterRole quotaplane-member-cluster to the cluster's webhook in namespace cluster-east (docs/clusters.md)",
		},
		"member: deleted by its own cluster's webhook": {
			op: admission.Delete, old: func() *quotav1alpha1.ResourceClaim {
				c := ofCluster()
				c.Namespace, c.Labels[members.Label] = "cluster-west", "west"
				return c
			}(), user: webhook,
		},
		"member: deleted by system:masters": {op: admission.Delete, old: ofCluster(), user: admin},
		"member: its namespace, by one who may not release its claims": {
			namespace: true, old: ofCluster(), user: webhook,
			wantErr: `namespaces "cluster-east" is forbidden: namespace cluster-east holds the ResourceClaims of member clusters east, which only their webhooks release, and user "system:serviceaccount:cluster-west:webhook" may not release them ` +
				`(verb "release" on clusters.quota.miloapis.com named after the cluster, in namespace cluster-<cluster>); deleting it would release their quota while their objects stay: delete those objects in their clusters first, or ask an administrator of the quota plane`,
		},
		"member: its namespace, by system:masters": {namespace: true, old: ofCluster(), user: admin},
		"member: created through the API by one who may not speak for the cluster": {
			op: admission.Create, obj: ofCluster(), user: alice,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: creating ResourceClaim cluster-east/c1 is refused: its label quota.miloapis.com/cluster=east says its object is stored in member cluster east, ` +
				`whose claims only that cluster's webhook may make and release, and user "alice" may not speak for it (verb "review" on clusters.quota.miloapis.com named east in namespace cluster-east). ` +
				"Remove the label: a claim made through the API charges an object of the quota plane, or none",
		},
		"plane: created through the API with a mark that names no plane": {
			op: admission.Create, obj: func() *quotav1alpha1.ResourceClaim {
				c := inPlane()
				c.Annotations[planes.Annotation] = "namespaces/x"
				return c
			}(), user: alice,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: creating ResourceClaim project-p1/c1 is refused: its annotation quota.miloapis.com/control-plane: control plane "namespaces/x": write projects/<name> or organizations/<name>`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rootObjects := map[schema.GroupVersionResource][]*unstructured.Unstructured{}
			for _, o := range tc.root {
				gvr := secrets
				if o.GetKind() == "Project" {
					gvr = projects
				}
				rootObjects[gvr] = append(rootObjects[gvr], o)
			}
			old := tc.old
			if old == nil {
				old = tc.obj
			}
			rootObjects[claimsGVR] = []*unstructured.Unstructured{toUnstructured(t, old).(*unstructured.Unstructured)}
			planeReads := map[string]*admissiontest.Reads{"projects/p1": {Objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{secrets: tc.plane}, Err: tc.planeErr}}
			p := newGuard(t, true, &admissiontest.Reads{Objects: rootObjects}, planeReads, az)
			var a admission.Attributes
			switch {
			case tc.namespace:
				a = admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "", old.Namespace, corev1.SchemeGroupVersion.WithResource("namespaces"), "", admission.Delete, nil, false, tc.user)
			case tc.op == admission.Create:
				a = admission.NewAttributesRecord(toUnstructured(t, tc.obj), nil, schema.GroupVersionKind{}, old.Namespace, old.Name, claimsGVR, "", tc.op, nil, false, tc.user)
			default:
				var obj runtime.Object
				if tc.obj != nil {
					obj = toUnstructured(t, tc.obj)
				}
				a = admission.NewAttributesRecord(obj, toUnstructured(t, tc.old), schema.GroupVersionKind{}, old.Namespace, old.Name, claimsGVR, "", tc.op, nil, false, tc.user)
			}
			gotErr := ""
			if err := p.(admission.ValidationInterface).Validate(context.Background(), a, nil); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}
