package admission

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// createWarned creates obj through the API as kubectl would and returns the
// warnings the server sent with the answer.
func createWarned(t *testing.T, obj client.Object, kind, resource string) []string {
	t.Helper()
	w := &quotatest.Warnings{}
	cfg := rest.CopyConfig(srv.Config)
	cfg.WarningHandler = w
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(quotav1alpha1.SchemeGroupVersion.WithKind(kind))
	r := dynamic.NewForConfigOrDie(cfg).Resource(quotav1alpha1.SchemeGroupVersion.WithResource(resource))
	if ns := obj.GetNamespace(); ns != "" {
		_, err = r.Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	} else {
		_, err = r.Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return w.All()
}

func hasWarning(got []string, parts ...string) bool {
	for _, g := range got {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(g, p)
		}
		if all {
			return true
		}
	}
	return false
}

// waitActive waits for obj's Active condition to have status, and returns it.
func waitActive(t *testing.T, c client.Client, obj client.Object, status metav1.ConditionStatus, conditions func() []metav1.Condition) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(conditions(), "Active")
		if cond == nil || cond.Status != status || cond.ObservedGeneration != obj.GetGeneration() {
			return false, nil
		}
		got = *cond
		return true, nil
	}); err != nil {
		t.Fatalf("%s never had Active=%s: %+v", obj.GetName(), status, conditions())
	}
	return got
}

// waitEvent waits for a Warning Event of reason on the object named name.
func waitEvent(t *testing.T, c client.Client, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &corev1.EventList{}
		if err := c.List(ctx, list); err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				found = e
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no Warning Event %s on %s", reason, name)
	}
	return found
}

// TestReferencesCheckedWhereTheyAreWritten: a registration whose consumer
// kind is misspelt is stored with a kubectl warning naming the field and the
// nearest kind, and is not Active (with an Event) until its kind is served —
// here, until a CRD for it is installed; a claiming kind not served is
// warned about the same way; a grant for a resource type nobody registered
// gets a warning and an Event naming the nearest registered type.
func TestReferencesCheckedWhereTheyAreWritten(t *testing.T) {
	ctx := context.Background()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")

	typo := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-typo"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organisation"},
		Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: f.RT("typo"), BaseUnit: "unit",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: "resourcemanager.miloapis.com", Kind: "Projects"}},
	}}
	got := createWarned(t, typo, "ResourceRegistration", "resourceregistrations")
	if !hasWarning(got, "spec.consumerType: resourcemanager.miloapis.com/Organisation is not served", "did you mean Organization?", "not Active until") {
		t.Errorf("warnings %q do not name the misspelt consumer kind", got)
	}
	if !hasWarning(got, "spec.claimingResources[0]: resourcemanager.miloapis.com/Projects is not served", "did you mean Project?") {
		t.Errorf("warnings %q do not name the misspelt claiming kind", got)
	}
	c := waitActive(t, f.C, typo, metav1.ConditionFalse, func() []metav1.Condition { return typo.Status.Conditions })
	if !strings.Contains(c.Message, "spec.consumerType: resourcemanager.miloapis.com/Organisation is not served") {
		t.Errorf("Active condition %q does not say why", c.Message)
	}
	waitEvent(t, f.C, typo.Name, "ConsumerTypeNotServed")

	// A consumer kind installed later: Active once it is served.
	group := f.ID + ".tenants.example.com"
	later := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-later"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: group, Kind: "Tenant"},
		Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: f.RT("later"), BaseUnit: "unit",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: "resourcemanager.miloapis.com", Kind: "Project"}},
	}}
	if got := createWarned(t, later, "ResourceRegistration", "resourceregistrations"); !hasWarning(got, "no API group "+group+" is served") {
		t.Errorf("warnings %q do not say the group is not served", got)
	}
	waitActive(t, f.C, later, metav1.ConditionFalse, func() []metav1.Condition { return later.Status.Conditions })
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "tenants." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "tenants", Singular: "tenant", Kind: "Tenant", ListKind: "TenantList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ax.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	waitActive(t, f.C, later, metav1.ConditionTrue, func() []metav1.Condition { return later.Status.Conditions })

	// A grant for a resource type nobody registered.
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "misspelt", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: f.Org, Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("project"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
	got = createWarned(t, g, "ResourceGrant", "resourcegrants")
	if !hasWarning(got, "spec.allowances[0].resourceType", string(f.RT("project")), "is not registered", "did you mean \""+string(f.RT("projects"))+"\"?") {
		t.Errorf("warnings %q do not name the nearest registered type", got)
	}
	c = waitActive(t, f.C, g, metav1.ConditionFalse, func() []metav1.Condition { return g.Status.Conditions })
	if !strings.Contains(c.Message, "did you mean "+string(f.RT("projects"))+"?") {
		t.Errorf("Active condition %q does not name the nearest registered type", c.Message)
	}
	if e := waitEvent(t, f.C, g.Name, "ResourceTypeNotRegistered"); !strings.Contains(e.Message, string(f.RT("projects"))) {
		t.Errorf("Event %q does not name the nearest registered type", e.Message)
	}
}
