package admission

import (
	"context"
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
	"k8s.io/utils/ptr"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestCRDKindAsTrigger charges creates of a custom resource, any version.
func TestCRDKindAsTrigger(t *testing.T) {
	ctx := context.Background()
	ax := apiextensionsclient.NewForConfigOrDie(srv.Config)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
	if _, err := ax.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dc := dynamic.NewForConfigOrDie(srv.Config)
	widgets := dc.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"})
	w := newWorld(t, 2)
	widget := func(name string, size int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name, "namespace": w.NS},
			"spec":     map[string]any{"size": size},
		}}
	}
	w.WaitPolicyReady(w.Policy("widgets", "example.com/v1", "Widget", "secrets", intstr.FromString("{{ trigger.spec.size }}")), metav1.ConditionTrue, widget("probe", 1))
	create := func(name string, size int64) error {
		_, err := widgets.Namespace(w.NS).Create(ctx, widget(name, size), metav1.CreateOptions{})
		return err
	}
	// The CRD may take a moment to be served.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return create("w1", 1) == nil, nil
	}); err != nil {
		t.Fatal("creating the first widget")
	}
	if err := create("w2", 1); err != nil {
		t.Fatal(err)
	}
	w.expectQuotaDenial(create("w3", 1), 1, 0, 2)
	w.WaitBucket(quotatest.N(2, 2, 0), "secrets")
}
