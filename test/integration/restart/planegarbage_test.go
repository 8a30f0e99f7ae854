package restart

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// What a crash leaves in a plane for its garbage collector — an owner gone
// before its dependents were looked at, a namespace gone before its
// contents were (as a release without the planes' namespace controller
// left them) — is collected when the server starts again: the leader of
// the restarted server sweeps every plane holding data. The leftovers are
// made by removing the owner's and the namespace's keys from etcd behind
// the API server's back, so nothing told the collector.
func TestPlaneGarbageLeftByACrashIsCollectedAtStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := startWithEngine(t, dir)
	defer func() { _ = s.Stop() }()
	admin := quotatest.NewClient(t, s.Config)
	org := quotatest.Organization(t, admin, "crash")
	project := quotatest.Project(t, admin, "crash-p", org.Name)
	plane := planes.Plane{Kind: planes.Projects, Name: project.Name, UID: project.UID}
	kube := kubernetes.NewForConfigOrDie(planes.ConfigFor(s.Config, plane))

	owner, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if _, err := kube.CoreV1().Secrets("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "left"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The pass the dependent's create asked for runs before the keys go.
	time.Sleep(2 * time.Second)
	etcd, err := s.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	prefix := "/registry" + plane.KeyPrefix() + "/"
	keys, err := etcd.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, kv := range keys.Kvs {
		k := string(kv.Key)
		if strings.HasSuffix(k, "/configmaps/default/owner") || strings.HasSuffix(k, "/namespaces/team") {
			if _, err := etcd.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	_ = etcd.Close()
	if removed != 2 {
		t.Fatalf("removed %d of the 2 keys under %s (%d keys there); the plane's data is not where the test looks", removed, prefix, len(keys.Kvs))
	}
	// Nothing told the collector: both stay while this server runs.
	time.Sleep(2 * time.Second)
	if _, err := kube.CoreV1().Secrets("default").Get(ctx, "dependent", metav1.GetOptions{}); err != nil {
		t.Fatalf("the dependent went before the restart (the test no longer stands for a crash): %v", err)
	}

	if err := s.StopKeep(); err != nil {
		t.Fatal(err)
	}
	s = startWithEngine(t, dir)
	kube = kubernetes.NewForConfigOrDie(planes.ConfigFor(s.Config, plane))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, e1 := kube.CoreV1().Secrets("default").Get(ctx, "dependent", metav1.GetOptions{})
		_, e2 := kube.CoreV1().ConfigMaps("team").Get(ctx, "left", metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), nil
	})
	if err != nil {
		t.Fatalf("after the restart, the dependent of a gone owner and the ConfigMap of a gone namespace are still stored: %v", err)
	}
}
