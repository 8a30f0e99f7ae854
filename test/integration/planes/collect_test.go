package planes

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// A namespace deleted in a plane is Terminating while what it holds is
// deleted through the plane (so quota is released as for any delete), then
// goes: nothing of it stays stored or charged, and nothing can be created
// in it meanwhile.
func TestDeletingANamespaceInAPlaneDeletesWhatItHolds(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "gcns", "Secret", "a")
	project := w.projects[0]
	w.grant("Organization", w.org, 10)
	w.grant("Project", project, 10)
	kube := w.planeKube(project)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{})
	must(t, err, "creating namespace work in the plane")
	for i := range 3 {
		_, err := kube.CoreV1().Secrets("work").Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
		must(t, err, "creating a Secret in the plane's namespace work")
	}
	_, err = kube.CoreV1().ConfigMaps("work").Create(ctx, w.configMap("c"), metav1.CreateOptions{})
	must(t, err, "creating a ConfigMap in the plane's namespace work")
	// A finalizer of someone else's holds one object: the namespace waits.
	held := w.configMap("held")
	held.Finalizers = []string{"example.com/hold"}
	_, err = kube.CoreV1().ConfigMaps("work").Create(ctx, held, metav1.CreateOptions{})
	must(t, err, "creating a held ConfigMap")
	waitProjectAllocated(t, w, project, 3)

	must(t, kube.CoreV1().Namespaces().Delete(ctx, "work", metav1.DeleteOptions{}), "deleting namespace work in the plane")
	eventually(t, 30*time.Second, "the Secrets and the unheld ConfigMap gone, the namespace Terminating", func(ctx context.Context) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "work", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the namespace must wait for the held ConfigMap: %v", err)
		}
		if ns.Status.Phase != corev1.NamespaceTerminating {
			return fmt.Errorf("phase %s", ns.Status.Phase)
		}
		return leftIn(ctx, kube, "work", 0, 1)
	})
	_, err = kube.CoreV1().Secrets("work").Create(ctx, w.secret("late"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("creating a Secret in a terminating namespace of a plane: want Forbidden, got %v", err)
	}
	waitProjectAllocated(t, w, project, 0)

	_, err = kube.CoreV1().ConfigMaps("work").Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	must(t, err, "releasing the held ConfigMap")
	eventually(t, 30*time.Second, "namespace work gone", func(ctx context.Context) error {
		if _, err := kube.CoreV1().Namespaces().Get(ctx, "work", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return leftIn(ctx, kube, "work", 0, 0)
	})
	// The name can be used again, empty.
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{})
	must(t, err, "creating namespace work again")
	must(t, leftIn(ctx, kube, "work", 0, 0), "the new namespace work")
}

// ownerReferences in a plane act as in any Kubernetes API: background
// deletion removes dependents after their owner, foreground keeps the owner
// until its blocking dependents are gone, orphaning keeps the dependents
// without the owner, and an object created naming an owner that does not
// exist is deleted. Quota follows: the deleted dependents' claims are
// released.
func TestOwnerReferencesInAPlane(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "gcown", "Secret", "a")
	project := w.projects[0]
	w.grant("Organization", w.org, 10)
	w.grant("Project", project, 10)
	kube := w.planeKube(project)
	owned := func(name string, owner *corev1.ConfigMap, block bool) *corev1.Secret {
		s := w.secret(name)
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(block)}}
		out, err := kube.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{})
		must(t, err, "creating Secret %s owned by %s", name, owner.Name)
		return out
	}
	owner := func(name string) *corev1.ConfigMap {
		out, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		must(t, err, "creating ConfigMap %s", name)
		return out
	}
	gone := func(what, name string, get func(context.Context, string, metav1.GetOptions) error) {
		t.Helper()
		eventually(t, 30*time.Second, what+" "+name+" deleted", func(ctx context.Context) error {
			if err := get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there: %v", err)
			}
			return nil
		})
	}
	secretGet := func(ctx context.Context, name string, o metav1.GetOptions) error {
		_, err := kube.CoreV1().Secrets("default").Get(ctx, name, o)
		return err
	}
	configMapGet := func(ctx context.Context, name string, o metav1.GetOptions) error {
		_, err := kube.CoreV1().ConfigMaps("default").Get(ctx, name, o)
		return err
	}

	bg, fg, orphan := owner("bg"), owner("fg"), owner("orphan")
	owned("bg-1", bg, false)
	owned("bg-2", bg, false)
	blocker := owned("fg-1", fg, true)
	held := w.secret("fg-held")
	held.OwnerReferences = blocker.OwnerReferences
	held.Finalizers = []string{"example.com/hold"}
	_, err := kube.CoreV1().Secrets("default").Create(ctx, held, metav1.CreateOptions{})
	must(t, err, "creating the held dependent of fg")
	owned("orphan-1", orphan, true)
	stray := w.secret("stray")
	stray.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "never-was", UID: "4a1d2f0e-0000-4000-8000-000000000001"}}
	_, err = kube.CoreV1().Secrets("default").Create(ctx, stray, metav1.CreateOptions{})
	must(t, err, "creating a Secret owned by a ConfigMap that does not exist")
	gone("Secret", "stray", secretGet)
	waitProjectAllocated(t, w, project, 5)

	must(t, kube.CoreV1().ConfigMaps("default").Delete(ctx, "bg", metav1.DeleteOptions{}), "deleting bg")
	gone("Secret", "bg-1", secretGet)
	gone("Secret", "bg-2", secretGet)

	must(t, kube.CoreV1().ConfigMaps("default").Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}), "deleting fg in the foreground")
	gone("Secret", "fg-1", secretGet)
	// fg-held is being deleted but held by its finalizer: it blocks fg.
	time.Sleep(3 * time.Second)
	cm, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "fg", metav1.GetOptions{})
	must(t, err, "fg must wait for its blocking dependent")
	if cm.DeletionTimestamp == nil {
		t.Fatalf("fg is not being deleted")
	}
	_, err = kube.CoreV1().Secrets("default").Patch(ctx, "fg-held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	must(t, err, "releasing fg-held")
	gone("ConfigMap", "fg", configMapGet)

	must(t, kube.CoreV1().ConfigMaps("default").Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationOrphan)}), "deleting orphan, orphaning")
	gone("ConfigMap", "orphan", configMapGet)
	s, err := kube.CoreV1().Secrets("default").Get(ctx, "orphan-1", metav1.GetOptions{})
	must(t, err, "orphan-1 must stay")
	if len(s.OwnerReferences) != 0 {
		t.Fatalf("orphan-1 still names its owner: %v", s.OwnerReferences)
	}
	waitProjectAllocated(t, w, project, 1)
}

// leftIn checks that namespace ns of a plane holds secrets Secrets and
// configMaps ConfigMaps.
func leftIn(ctx context.Context, kube kubernetes.Interface, ns string, secrets, configMaps int) error {
	s, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	c, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(s.Items) != secrets || len(c.Items) != configMaps {
		return fmt.Errorf("namespace %s holds %d Secrets and %d ConfigMaps, want %d and %d", ns, len(s.Items), len(c.Items), secrets, configMaps)
	}
	return nil
}

// waitProjectAllocated waits until project's bucket, read in its plane,
// shows want allocated.
func waitProjectAllocated(t *testing.T, w *world, project string, want int64) {
	t.Helper()
	cl := quotatest.NewClient(t, planeConfig(srv.Config, projectPlane(project)))
	ref := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}
	eventually(t, 30*time.Second, fmt.Sprintf("project %s's bucket at %d", project, want), func(ctx context.Context) error {
		b, err := bucketIn(ctx, cl, w.rt, ref)
		if err != nil {
			return err
		}
		if b.Status.Allocated != want {
			return fmt.Errorf("allocated %d", b.Status.Allocated)
		}
		return nil
	})
}

// An adversary in one plane cannot make the collector act in another:
// a dependent naming another plane's object (its name and UID) as owner is
// collected in its own plane (no such owner there), and deleting an
// object of the same name in the foreground touches nothing of the other
// plane's. A pass reads and writes only the plane it was asked for by a
// request made there.
func TestAPlanesCollectorActsOnlyInThatPlane(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "gcatk", "Secret", "a", "b")
	attacker, victim := w.projects[0], w.projects[1]
	w.grant("Organization", w.org, 10)
	w.grant("Project", attacker, 5)
	w.grant("Project", victim, 5)
	vk, ak := w.planeKube(victim), w.member(attacker)
	target, err := vk.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "target"}}, metav1.CreateOptions{})
	must(t, err, "creating the victim's ConfigMap")
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "target", UID: target.UID, BlockOwnerDeletion: ptr.To(true)}}
	vdep := w.secret("victim-dep")
	vdep.OwnerReferences = ref
	_, err = vk.CoreV1().Secrets("default").Create(ctx, vdep, metav1.CreateOptions{})
	must(t, err, "creating the victim's dependent")

	stray := w.secret("stray")
	stray.OwnerReferences = ref
	_, err = ak.CoreV1().Secrets("default").Create(ctx, stray, metav1.CreateOptions{})
	must(t, err, "creating, in the attacker's plane, a Secret naming the victim's ConfigMap as owner")
	eventually(t, 30*time.Second, "the attacker's stray Secret collected in its own plane", func(ctx context.Context) error {
		if _, err := ak.CoreV1().Secrets("default").Get(ctx, "stray", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	_, err = ak.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "target"}}, metav1.CreateOptions{})
	must(t, err, "creating the attacker's own ConfigMap target")
	must(t, ak.CoreV1().ConfigMaps("default").Delete(ctx, "target", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}),
		"deleting the attacker's target in the foreground")
	eventually(t, 30*time.Second, "the attacker's target gone", func(ctx context.Context) error {
		if _, err := ak.CoreV1().ConfigMaps("default").Get(ctx, "target", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	got, err := vk.CoreV1().ConfigMaps("default").Get(ctx, "target", metav1.GetOptions{})
	must(t, err, "the victim's ConfigMap must stay")
	if got.UID != target.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the victim's ConfigMap was touched: uid %s (was %s), deletionTimestamp %v", got.UID, target.UID, got.DeletionTimestamp)
	}
	d, err := vk.CoreV1().Secrets("default").Get(ctx, "victim-dep", metav1.GetOptions{})
	must(t, err, "the victim's dependent must stay")
	if len(d.OwnerReferences) != 1 || d.DeletionTimestamp != nil {
		t.Fatalf("the victim's dependent was touched: %+v", d.ObjectMeta)
	}
	waitProjectAllocated(t, w, victim, 1)
	waitProjectAllocated(t, w, attacker, 0)
}
