package updates

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAnUnservedVersionReleasesNothing: claims record their object at the
// version it was created at (widgets.v1.versions.example.com). The platform
// moves Widgets to v2 and stops serving v1 — routine — and a new leader term
// starts. Before, it took the unserved version for deleted objects: the
// claims placed in another namespace were deleted (bucket 3 → 0, 6 widgets
// stored against a limit of 3) and the others were no longer guarded. Now the
// objects are read at the version served: every claim stays, the bucket
// stays at the limit, a fourth widget is refused, no claim of a live widget
// can be deleted, and a widget deleted meanwhile still releases its claim.
func TestAnUnservedVersionReleasesNothing(t *testing.T) {
	ctx := context.Background()
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	crdName := "widgets.versions.example.com"
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "integer"}}}}}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "versions.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaProps},
				{Name: "v2", Served: true, Storage: false, Schema: schemaProps},
			},
		},
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v1 := schema.GroupVersionResource{Group: "versions.example.com", Version: "v1", Resource: "widgets"}
	v2 := v1
	v2.Version = "v2"
	dc := dynamic.NewForConfigOrDie(srv.Config)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dc.Resource(v1).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		t.Fatal("the Widget CRD is not served")
	}

	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"widgets"}, quotav1alpha1.ClaimingResource{APIGroup: "versions.example.com", Kind: "Widget"})
	f.Grant("g", map[string][]quotatest.Bucket{"widgets": {{Amount: 3}}})
	central := "widget-claims-" + f.ID
	if err := f.C.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: central}}); err != nil {
		t.Fatal(err)
	}
	p := f.Policy("widgets", "versions.example.com/v1", "Widget", "widgets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = central
	})
	widget := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "versions.example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": f.NS}, "spec": map[string]any{"size": int64(1)}}}
	}
	f.WaitPolicyReady(p, metav1.ConditionTrue, widget("in-force-probe"))
	for _, n := range []string{"w1", "w2", "w3"} {
		if _, err := dc.Resource(v1).Namespace(f.NS).Create(ctx, widget(n), metav1.CreateOptions{}); err != nil {
			t.Fatalf("widget %s within the limit: %v", n, err)
		}
	}
	claimsIn := func() []quotav1alpha1.ResourceClaim {
		var l quotav1alpha1.ResourceClaimList
		if err := f.C.List(ctx, &l, client.InNamespace(central)); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(claimsIn()) == 3, nil
	}); err != nil {
		t.Fatalf("%d claims in %s; want 3", len(claimsIn()), central)
	}
	f.WaitBucket(quotatest.N(3, 3, 0), "widgets")

	// v2 becomes the storage version and v1 is no longer served.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := ax.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Versions[0].Served, cur.Spec.Versions[0].Storage = false, false
		cur.Spec.Versions[1].Storage = true
		_, err = ax.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dc.Resource(v1).Namespace(f.NS).List(ctx, metav1.ListOptions{Limit: 1})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Fatal("v1 is still served")
	}

	// While no engine leads, one widget goes: the next term must still
	// release its claim (the canary that its check of every claim ran).
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	systemNamespace := quotatest.FastEngineOptions().SystemNamespace
	leading := func(want string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			mf, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			return err == nil && strings.Contains(string(mf), "milo_quota_engine_leader "+want), nil
		}); err != nil {
			t.Fatalf("milo_quota_engine_leader did not become %s", want)
		}
	}
	quotatest.TakeEngineLease(t, kube, systemNamespace, "another-replica", 3600)
	leading("0")
	if err := dc.Resource(v2).Namespace(f.NS).Delete(ctx, "w3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.CoordinationV1().Leases(systemNamespace).Delete(ctx, "quotaplane-quota-engine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leading("1")
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(claimsIn()) == 2, nil
	}); err != nil {
		t.Fatalf("the claim of the deleted widget was not released by the next term: %d claims", len(claimsIn()))
	}
	for _, c := range claimsIn() {
		if c.Spec.ResourceRef.Name == "w3" {
			t.Errorf("the claim of the deleted widget w3 is still there")
		}
	}
	f.WaitBucket(quotatest.N(3, 2, 1), "widgets")

	// The two live widgets keep their claims and the limit holds.
	v2widget := widget("w4")
	v2widget.SetAPIVersion("versions.example.com/v2")
	if _, err := dc.Resource(v2).Namespace(f.NS).Create(ctx, v2widget, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a third widget within the limit, through v2: %v", err)
	}
	v2widget = widget("w5")
	v2widget.SetAPIVersion("versions.example.com/v2")
	if _, err := dc.Resource(v2).Namespace(f.NS).Create(ctx, v2widget, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a fourth widget against a limit of 3: want 403, got %v", err)
	}
	f.WaitBucket(quotatest.N(3, 3, 0), "widgets")
	for _, c := range claimsIn() {
		if c.Spec.ResourceRef.Name != "w1" {
			continue
		}
		err := f.C.Delete(ctx, &c)
		if !apierrors.IsForbidden(err) {
			t.Fatalf("deleting the claim of the live widget w1: want 403, got %v", err)
		}
	}
	stored, err := dc.Resource(v2).Namespace(f.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(stored.Items); n != 3 || len(claimsIn()) != 3 {
		t.Errorf("%d widgets stored, %d claims; want 3 and 3", n, len(claimsIn()))
	}
	quotatest.VerifyClean(t, srv)
}
