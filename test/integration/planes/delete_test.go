package planes

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// Deleting a project removes its plane: no key is left in etcd under the
// plane's prefix, the claims its objects held are gone and its bucket's
// quota is released to the organization.
func TestDeletingAProjectRemovesItsPlane(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "del", "Secret", "a", "b")
	w.grant("Organization", w.org, 10)
	w.grant("Project", w.projects[0], 10)
	w.grant("Project", w.projects[1], 10)
	gone, kept := w.projects[0], w.projects[1]
	for _, p := range []string{gone, kept} {
		kube := w.planeKube(p)
		for i := 0; i < 3; i++ {
			_, err := kube.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
			must(t, err, "creating a Secret in %s's plane", p)
		}
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
		must(t, err, "creating a namespace in %s's plane", p)
		_, err = kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
		must(t, err, "creating a ConfigMap in %s's plane", p)
	}
	orgPlaneClient := newPlaneClient(t, orgPlane(w.org))
	orgRef := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}
	waitAllocated := func(want int64) {
		t.Helper()
		eventually(t, 30*time.Second, fmt.Sprintf("the organization's bucket at %d", want), func(ctx context.Context) error {
			b, err := bucketIn(ctx, orgPlaneClient, w.rt, orgRef)
			if err != nil {
				return err
			}
			if b.Status.Allocated != want {
				return fmt.Errorf("allocated %d", b.Status.Allocated)
			}
			return nil
		})
	}
	waitAllocated(6)

	p := &rmv1alpha1.Project{}
	must(t, w.admin.Get(ctx, client.ObjectKey{Name: gone}, p), "reading project %s", gone)
	plane := planes.Plane{Kind: planes.Projects, Name: gone, UID: p.UID}
	etcd, err := srv.EtcdClient()
	must(t, err, "connecting to etcd")
	defer etcd.Close()
	prefix := "/registry" + plane.KeyPrefix() + "/"
	keys := func() int64 {
		res, err := etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		must(t, err, "counting keys under %s", prefix)
		return res.Count
	}
	if n := keys(); n < 7 {
		t.Fatalf("only %d keys under %s before the project is deleted; the plane's data is not where the test looks", n, prefix)
	}

	must(t, w.admin.Delete(ctx, p), "deleting project %s", gone)
	eventually(t, 60*time.Second, "the project gone", func(ctx context.Context) error {
		if err := w.admin.Get(ctx, client.ObjectKey{Name: gone}, &rmv1alpha1.Project{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	eventually(t, 30*time.Second, "no key left under the plane's prefix", func(ctx context.Context) error {
		if n := keys(); n != 0 {
			return fmt.Errorf("%d keys left under %s", n, prefix)
		}
		return nil
	})
	waitAllocated(3)
	eventually(t, 60*time.Second, "the deleted project's claims gone", func(ctx context.Context) error {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := w.admin.List(ctx, list, client.InNamespace(planes.ProjectNamespace(gone))); err != nil {
			return err
		}
		if len(list.Items) != 0 {
			return fmt.Errorf("%d claims left", len(list.Items))
		}
		return nil
	})
	// The other project's plane is untouched.
	s, err := w.planeKube(kept).CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "world=" + w.id})
	must(t, err, "listing the other plane's Secrets")
	if len(s.Items) != 3 {
		t.Errorf("the other project's plane has %d of its 3 Secrets", len(s.Items))
	}
	if err := canUse(ctx, srv.Config, projectPlane(gone)); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted project's plane still answers: %v", err)
	}
}
