package claimguard

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/admissiontest"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
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

	const holds = `resourceclaims.quota.miloapis.com "c1" is forbidden: ResourceClaim team-a/c1 holds the quota of Deployment team-a/web (uid u1)`
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
			wantErr: holds + "; this update changes its annotation quota.miloapis.com/policy, which only the garbage collector and the quota engine may do: delete the object to release its quota",
		},
		"update: the ownerReference to the object is removed": {
			resource: claimsGVR, op: admission.Update, obj: orphaned, old: admitted(), user: alice,
			wantErr: holds + "; this update removes its ownerReference to that object (as kubectl delete --cascade=orphan would), which only the garbage collector and the quota engine may do: delete the object to release its quota",
		},
		"update: the garbage collector removes the ownerReference": {
			resource: claimsGVR, op: admission.Update, obj: orphaned, old: admitted(), user: server,
		},
		"update: a label is added": {
			resource: claimsGVR, op: admission.Update, obj: relabelled, old: admitted(), user: alice,
		},
		"update: a claim not made at admission": {
			resource: claimsGVR, op: admission.Update, obj: unannotatedOrphaned, old: unannotated, user: alice,
		},
		"delete: the object exists": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: alice,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
			wantErr: holds + ", which exists; delete that object to release its quota (its claim goes with it)",
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
			wantErr: "Internal error occurred: checking whether the object of ResourceClaim team-a/c1 exists: reading the CustomResourceDefinition of deployments.apps: connection refused",
		},
		"delete: by the garbage collector while the object exists": {
			resource: claimsGVR, op: admission.Delete, old: admitted(), user: server,
			objects: []*unstructured.Unstructured{deployment("u1", false)},
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
			register := func(p *admission.Plugins) { Register(p, systemNamespace, !tc.noEngine) }
			p := admissiontest.NewPlugin(t, register, PluginName, reads, mayClaim)
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
			wantErr: `namespaces "central" is forbidden: namespace central holds the ResourceClaims of 1 objects that live outside it and exist (Deployment team-a/web (uid u1)); deleting it would release their quota while they stay: delete those objects first (their claims go with them), then the namespace`},
		"namespace whose objects are gone": {resource: namespaces, old: central()},
		"namespace holding a claim beside its object": {resource: namespaces, old: func() *quotav1alpha1.ResourceClaim {
			c := admitted()
			c.Namespace = "central"
			c.Spec.ResourceRef.Namespace = "central"
			return c
		}(), objectNow: true},
		"the server deleting a live object's claim elsewhere": {resource: claimsGVR, old: central(), objectNow: true,
			wantErr: `resourceclaims.quota.miloapis.com "c1" is forbidden: ResourceClaim central/c1 holds the quota of Deployment team-a/web (uid u1), which lives outside this namespace and exists; the claim stays until that object is deleted`},
		"the server deleting it once its object is gone":     {resource: claimsGVR, old: central()},
		"the server deleting a claim beside its live object": {resource: claimsGVR, old: admitted(), objectNow: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objects := map[schema.GroupVersionResource][]*unstructured.Unstructured{claimsGVR: {stored(t, tc.old)}}
			if tc.objectNow {
				objects[deployments] = []*unstructured.Unstructured{deployment("u1", false)}
			}
			p := admissiontest.NewPlugin(t, func(p *admission.Plugins) { Register(p, systemNamespace, true) }, PluginName,
				&admissiontest.Reads{Objects: objects}, mayClaim)
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
