package planes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// TestServerSideApplyCreatesAClaimInAPlane: server-side apply creates a
// ResourceClaim through a project's plane, in the plane's milo-system and
// in a namespace of the plane, as it does at the root (docs/control-planes.md
// promises apply in every plane); the claim is decided, shown where it was
// applied and kept at the root. A claim that does not exist answers 404
// with its name, never the storage key.
func TestServerSideApplyCreatesAClaimInAPlane(t *testing.T) {
	ctx := context.Background()
	w := newWorldWithoutPolicy(t, "ssa", "ConfigMap", "web")
	project := w.projects[0]
	w.grant("Project", project, 5)
	dyn := dynamic.NewForConfigOrDie(planeConfig(srv.Config, projectPlane(project)))
	claims := dyn.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims"))
	for _, ns := range []string{"milo-system", "default"} {
		name := "applied-in-" + ns
		manifest := fmt.Sprintf(`{"apiVersion":"quota.miloapis.com/v1alpha1","kind":"ResourceClaim","metadata":{"name":%q,"namespace":%q},
"spec":{"consumerRef":{"apiGroup":%q,"kind":"Project","name":%q},"requests":[{"resourceType":%q,"amount":1}]}}`,
			name, ns, rmv1alpha1.GroupName, project, w.rt)
		got, err := claims.Namespace(ns).Patch(ctx, name, types.ApplyPatchType, []byte(manifest), metav1.PatchOptions{FieldManager: "ssa-test"})
		if err != nil {
			t.Fatalf("server-side apply of a new claim in the plane's %s: %v", ns, err)
		}
		if got.GetNamespace() != ns {
			t.Errorf("the applied claim is shown in namespace %q; want %q", got.GetNamespace(), ns)
		}
		// Applied again: an update of the same claim, not a second one.
		if _, err := claims.Namespace(ns).Patch(ctx, name, types.ApplyPatchType, []byte(manifest), metav1.PatchOptions{FieldManager: "ssa-test"}); err != nil {
			t.Fatalf("applying the claim in %s a second time: %v", ns, err)
		}
		eventually(t, 30*time.Second, "the applied claim in "+ns+" granted", func(ctx context.Context) error {
			c, err := claims.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds := unstructuredConditions(c.Object)
			if !strings.Contains(conds, quotav1alpha1.ClaimConditionGranted+"=True") {
				return fmt.Errorf("conditions %s", conds)
			}
			return nil
		})
		root := &quotav1alpha1.ResourceClaim{}
		must(t, w.admin.Get(ctx, types.NamespacedName{Namespace: planes.ProjectNamespace(project), Name: name}, root), "reading the applied claim at the root")
		if ns != "milo-system" && root.Labels[quotav1alpha1.LabelPlaneNamespace] != ns {
			t.Errorf("the root's claim has label %s=%q; want %q", quotav1alpha1.LabelPlaneNamespace, root.Labels[quotav1alpha1.LabelPlaneNamespace], ns)
		}
	}
	waitProjectAllocated(t, w, project, 2)

	_, err := claims.Namespace("default").Get(ctx, "never-made", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a claim never made, read in the plane: want 404, got %v", err)
	}
	if strings.Contains(err.Error(), "/") || !strings.Contains(err.Error(), `"never-made" not found`) {
		t.Errorf("the 404 of a missing claim names something else than the claim: %v", err)
	}
	_, err = claims.Namespace("default").Patch(ctx, "never-made", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
	if !apierrors.IsNotFound(err) || strings.Contains(err.Error(), "/") {
		t.Errorf("a merge patch of a claim never made, in the plane: want a 404 naming the claim only, got %v", err)
	}
}

// unstructuredConditions renders status.conditions as "Type=Status,...".
func unstructuredConditions(obj map[string]any) string {
	st, _ := obj["status"].(map[string]any)
	list, _ := st["conditions"].([]any)
	var out []string
	for _, c := range list {
		m, _ := c.(map[string]any)
		out = append(out, fmt.Sprintf("%v=%v", m["type"], m["status"]))
	}
	return strings.Join(out, ",")
}
