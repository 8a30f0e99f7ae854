package planes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Two projects' planes each create a Secret and a ConfigMap of the same
// name; each sees its own, the root sees neither, and names repeat freely.
func TestPlanesAreIsolated(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t, "iso", "iso-owner")
	tn.project(t, "iso-a")
	tn.project(t, "iso-b")
	for _, name := range []string{"iso-a", "iso-b"} {
		kube := kubernetes.NewForConfigOrDie(planeConfig(impersonating(srv.Config, tn.owner), projectPlane(name)))
		_, err := kube.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared-name"},
			StringData: map[string]string{"owner": name}}, metav1.CreateOptions{})
		must(t, err, "creating a Secret in project %s's plane", name)
		_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared-name"},
			Data: map[string]string{"owner": name}}, metav1.CreateOptions{})
		must(t, err, "creating a ConfigMap in project %s's plane", name)
	}
	for _, name := range []string{"iso-a", "iso-b"} {
		kube := kubernetes.NewForConfigOrDie(planeConfig(srv.Config, projectPlane(name)))
		s, err := kube.CoreV1().Secrets("default").Get(ctx, "shared-name", metav1.GetOptions{})
		must(t, err, "reading the Secret in %s's plane", name)
		if got := string(s.Data["owner"]); got != name {
			t.Errorf("the Secret read in project %s's plane is %s's", name, got)
		}
		cms, err := kube.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		must(t, err, "listing ConfigMaps in %s's plane", name)
		n := 0
		for _, cm := range cms.Items {
			if cm.Name == "shared-name" {
				n++
				if cm.Data["owner"] != name {
					t.Errorf("project %s's plane lists %s's ConfigMap", name, cm.Data["owner"])
				}
			}
		}
		if n != 1 {
			t.Errorf("project %s's plane lists %d ConfigMaps named shared-name, want 1", name, n)
		}
	}
	root := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := root.CoreV1().Secrets("default").Get(ctx, "shared-name", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the root sees a plane's Secret: %v", err)
	}
}
