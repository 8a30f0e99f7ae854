package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

var quotaResources = map[string]string{
	"ResourceRegistration": "resourceregistrations",
	"ResourceGrant":        "resourcegrants",
	"ResourceClaim":        "resourceclaims",
	"AllowanceBucket":      "allowancebuckets",
	"ClaimCreationPolicy":  "claimcreationpolicies",
	"GrantCreationPolicy":  "grantcreationpolicies",
}

func clients(t *testing.T, cfg *rest.Config) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc, dc
}

func mustObject(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("bad test manifest: %v", err)
	}
	return u
}

func gvrOf(t *testing.T, u *unstructured.Unstructured) schema.GroupVersionResource {
	t.Helper()
	gvk := u.GroupVersionKind()
	if r, ok := quotaResources[gvk.Kind]; ok && gvk.Group == "quota.miloapis.com" {
		return gvk.GroupVersion().WithResource(r)
	}
	return gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
}

func create(ctx context.Context, t *testing.T, dc dynamic.Interface, manifest string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := mustObject(t, manifest)
	return dc.Resource(gvrOf(t, u)).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
}

func mustCreate(ctx context.Context, t *testing.T, dc dynamic.Interface, manifest string) *unstructured.Unstructured {
	t.Helper()
	got, err := create(ctx, t, dc, manifest)
	if err != nil {
		t.Fatalf("create: %v\n%s", err, manifest)
	}
	return got
}

// waitGone waits until get reports NotFound.
func waitGone(ctx context.Context, t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s was not deleted: %v", what, err)
	}
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

func quotaGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "quota.miloapis.com", Version: "v1alpha1", Resource: resource}
}
