package hardening

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// TestClaimsInAnotherNamespaceOutliveTheGarbageCollector: a policy placing
// its claims in a central namespace (as the seeds' examples do). Kubernetes
// treats a cross-namespace ownerReference as absent, so such a claim must
// not carry one: the garbage collector runs, the claims stay, the limit
// holds; deleting an object releases its quota all the same.
func TestClaimsInAnotherNamespaceOutliveTheGarbageCollector(t *testing.T) {
	w := newWorld(t, 2)
	central := "central-" + w.ID
	if err := w.C.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: central}}); err != nil {
		t.Fatal(err)
	}
	p := w.policy("central", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = central
	})
	w.WaitPolicyReady(p, metav1.ConditionTrue)
	for _, n := range []string{"a", "b"} {
		if err := w.configMap(w.NS, n); err != nil {
			t.Fatalf("configmap %s within the limit: %v", n, err)
		}
	}
	eventually(t, 15*time.Second, "two granted claims in the central namespace", func() bool {
		_, un := w.uncharged(w.NS, central)
		return len(un) == 0 && len(w.claimsIn(central)) == 2
	})
	// The garbage collector has processed the central namespace once a
	// dependent created after the claims, with an owner that does not
	// exist, is gone.
	canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gc-canary", Namespace: central,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "absent", UID: uuid.NewUUID()}}}}
	if err := w.C.Create(context.Background(), canary); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the garbage collector deleting its canary", func() bool {
		return apierrors.IsNotFound(w.C.Get(context.Background(), client.ObjectKeyFromObject(canary), &corev1.ConfigMap{}))
	})
	stored, un := w.uncharged(w.NS, central)
	if stored != 2 || len(un) != 0 {
		t.Fatalf("after the garbage collector ran: %d ConfigMaps stored, uncharged %v", stored, un)
	}
	w.WaitBucket(quotatest.N(2, 2, 0), "units")
	err := w.configMap(w.NS, "c")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a third ConfigMap over the limit of 2: want 403, got %v", err)
	}
	// The object goes; the engine's own watch deletes its claim.
	if err := w.C.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: w.NS}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the claim of the deleted ConfigMap deleted", func() bool {
		return len(w.claimsIn(central)) == 1
	})
	w.WaitBucket(quotatest.N(2, 1, 1), "units")
	if err := w.configMap(w.NS, "c"); err != nil {
		t.Fatalf("after a delete freed a unit: %v", err)
	}
}

// TestClaimNamesThatCollideAreRefused: a literal claim name makes every
// create after the first collide. Each must be refused, naming the policy
// and the name, never stored uncharged; two policies rendering one name in
// one create are refused too, and admission keeps deciding afterwards.
func TestClaimNamesThatCollideAreRefused(t *testing.T) {
	w := newWorld(t, 10)
	p := w.policy("literal", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Name = "fixed"
	})
	w.WaitPolicyReady(p, metav1.ConditionTrue)
	if err := w.configMap(w.NS, "first"); err != nil {
		t.Fatalf("first create: %v", err)
	}
	for _, n := range []string{"second", "third"} {
		err := w.configMap(w.NS, n)
		if !apierrors.IsConflict(err) {
			t.Fatalf("create %s whose claim name is taken: want 409, got %v", n, err)
		}
		mustContain(t, err, p.Name, w.NS+"/fixed", "not created", "generateName")
	}
	eventually(t, 15*time.Second, "the first ConfigMap charged", func() bool {
		_, un := w.uncharged(w.NS, w.NS)
		return len(un) == 0
	})
	stored, un := w.uncharged(w.NS, w.NS)
	if stored != 1 || len(un) != 0 {
		t.Fatalf("%d ConfigMaps stored, uncharged %v; want 1 stored and charged", stored, un)
	}
	w.WaitBucket(quotatest.N(10, 1, 9), "units")

	// Two policies, one name, one create: refused, nothing held, nothing wedged.
	if err := w.C.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	twin := func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
		p.Spec.Target.ResourceClaimTemplate.Metadata.Name = "twin-{{ trigger.metadata.name }}"
	}
	w.WaitPolicyReady(w.policy("twin-a", twin), metav1.ConditionTrue)
	w.WaitPolicyReady(w.policy("twin-b", twin), metav1.ConditionTrue)
	err := w.C.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: w.NS}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("two policies rendering one claim name: want 409, got %v", err)
	}
	mustContain(t, err, "twin-s", "for the same create")
	w.WaitBucket(quotatest.N(10, 1, 9), "units")
	// Admission still decides, at once.
	ok := w.policy("after", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q && trigger.metadata.name.startsWith('after')", w.NS)}}
	})
	w.WaitPolicyReady(ok, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-probe", Namespace: w.NS}})
	start := time.Now()
	if err := w.configMap(w.NS, "after-1"); err != nil {
		t.Fatalf("a create after the collisions: %v", err)
	}
	// Bound 2 s, at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 5 ms here alone (3 runs). A wedged admission would wait for
	// its 10 s decide timeout.
	timed.Within(t, "a create after the claim-name collisions", time.Since(start), 2*time.Second)
	w.WaitBucket(quotatest.N(10, 2, 8), "units")
}

// TestAClaimHeldByItsObjectCannotBeRemoved: a claim made at admission cannot
// be deleted, or cut from its object, while the object exists; deleting the
// object with --cascade=orphan does not leave quota held for nothing.
func TestAClaimHeldByItsObjectCannotBeRemoved(t *testing.T) {
	w := newWorld(t, 3)
	w.WaitPolicyReady(w.policy("held"), metav1.ConditionTrue)
	if err := w.configMap(w.NS, "holder"); err != nil {
		t.Fatal(err)
	}
	var claim quotav1alpha1.ResourceClaim
	eventually(t, 15*time.Second, "the claim of holder", func() bool {
		cs := w.claimsIn(w.NS)
		if len(cs) == 1 {
			claim = cs[0]
		}
		return len(cs) == 1
	})
	err := w.C.Delete(context.Background(), &claim)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a claim whose object exists: want 403, got %v", err)
	}
	mustContain(t, err, "ConfigMap "+w.NS+"/holder", "delete that object")
	orphaned := claim.DeepCopy()
	orphaned.OwnerReferences = nil
	err = w.C.Update(context.Background(), orphaned)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("removing a claim's ownerReference: want 403, got %v", err)
	}
	mustContain(t, err, "ConfigMap "+w.NS+"/holder", "ownerReference")
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error { // at the current version (see the tenant test)
		forged := &quotav1alpha1.ResourceClaim{}
		if err := w.C.Get(context.Background(), client.ObjectKeyFromObject(&claim), forged); err != nil {
			return err
		}
		meta.SetStatusCondition(&forged.Status.Conditions, metav1.Condition{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionFalse, Reason: "Forged", Message: "x"})
		return w.C.Status().Update(context.Background(), forged)
	})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("writing a claim's status as a user: want 403, got %v", err)
	}
	w.WaitBucket(quotatest.N(3, 1, 2), "units")

	// kubectl delete --cascade=orphan: the garbage collector removes the
	// claim's ownerReference; the engine sees the object gone and deletes
	// the claim: the unit comes back.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "holder", Namespace: w.NS}}
	if err := w.C.Delete(context.Background(), cm, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the orphaned claim deleted", func() bool { return len(w.claimsIn(w.NS)) == 0 })
	w.WaitBucket(quotatest.N(3, 0, 3), "units")
}

// TestDeletingTheClaimsNamespaceReleasesNothing: the claims of objects that
// live elsewhere are in a central namespace. Deleting that namespace would
// release their quota while the objects stay (3 objects against a limit of 2,
// then 3 more admitted); it is refused, naming the objects, and the limit
// holds. Once the objects are gone, the namespace deletes.
func TestDeletingTheClaimsNamespaceReleasesNothing(t *testing.T) {
	w := newWorld(t, 2)
	ctx := context.Background()
	central := "held-" + w.ID
	if err := w.C.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: central}}); err != nil {
		t.Fatal(err)
	}
	p := w.policy("central", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = central
	})
	w.WaitPolicyReady(p, metav1.ConditionTrue)
	for _, n := range []string{"a", "b"} {
		if err := w.configMap(w.NS, n); err != nil {
			t.Fatalf("configmap %s within the limit: %v", n, err)
		}
	}
	eventually(t, 15*time.Second, "two claims in the central namespace", func() bool { return len(w.claimsIn(central)) == 2 })
	w.WaitBucket(quotatest.N(2, 2, 0), "units")

	err := w.C.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: central}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("deleting the namespace of two live objects' claims: want 403, got %v", err)
	}
	mustContain(t, err, central, "ConfigMap "+w.NS+"/a", "ConfigMap "+w.NS+"/b", "delete those objects first")
	ns := &corev1.Namespace{}
	if err := w.C.Get(ctx, client.ObjectKey{Name: central}, ns); err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("the namespace is being deleted anyway (err %v)", err)
	}
	w.WaitBucket(quotatest.N(2, 2, 0), "units")
	if err := w.configMap(w.NS, "c"); !apierrors.IsForbidden(err) {
		t.Fatalf("a third ConfigMap over the limit of 2: want 403, got %v", err)
	}
	quotatest.VerifyClean(t, srv)

	for _, n := range []string{"a", "b"} {
		if err := w.C.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: w.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "the claims of the deleted objects gone", func() bool { return len(w.claimsIn(central)) == 0 })
	if err := w.C.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: central}}); err != nil {
		t.Fatalf("deleting the namespace once its objects are gone: %v", err)
	}
	w.WaitBucket(quotatest.N(2, 0, 2), "units")
}
