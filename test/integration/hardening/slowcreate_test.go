package hardening

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestASlowCreateHoldsItsQuotaUntilStored: a create is held for seconds
// between its admission (its grant recorded in the journal) and its storage,
// as a slow admission step after quotaplane's would hold it, while the
// garbage collector runs and a tenant allowed to delete claims tries to
// release what it holds. Until the object is stored there is no claim to
// delete (the grant is a journal key, not an API object) and the held unit
// counts: a create for the last unit is refused. Once stored, the object has
// exactly one granted claim owned by it, which the collector keeps and the
// tenant cannot delete. A slow create whose client gave up (its request
// deadline passed inside the delay) leaves neither an object nor quota held.
func TestASlowCreateHoldsItsQuotaUntilStored(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 2)
	w.WaitPolicyReady(w.policy("slow", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Metadata.Name = "{{ trigger.metadata.name }}-units"
	}), metav1.ConditionTrue)
	const delay = 6 * time.Second // past the settler's recheck period and its 5 s grace
	faults.SetAdmittedDelay(func(claims []*quotav1alpha1.ResourceClaim) time.Duration {
		if ref := claims[0].Spec.ResourceRef; ref != nil && ref.Namespace == w.NS && (ref.Name == "slow" || ref.Name == "gave-up") {
			return delay
		}
		return 0
	})
	defer faults.SetAdmittedDelay(nil)
	tenant := impersonatedTenant(t, w, "tenant-"+w.ID)

	var wg sync.WaitGroup
	var slowErr error
	began := time.Now()
	wg.Go(func() { slowErr = w.configMap(w.NS, "slow") })

	// The grant is held while the create waits: the bucket counts it, no
	// claim exists, the ConfigMap is not stored.
	w.WaitBucket(quotatest.N(2, 1, 1), "units")
	if err := w.C.Get(ctx, client.ObjectKey{Namespace: w.NS, Name: "slow"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the slow ConfigMap is already readable (%v): the delay did not hold it between admission and storage", err)
	}
	if cs := w.claimsIn(w.NS); len(cs) != 0 {
		t.Fatalf("claims exist before the slow ConfigMap is stored: %v", cs)
	}
	// The tenant deletes the claim the policy will write: there is nothing
	// to delete, and the unit stays held.
	err := tenant.Delete(ctx, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.NS, Name: "slow-units"}})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a tenant deleting the claim of a create not yet stored: want 404 (the grant is not an API object), got %v", err)
	}
	// The garbage collector runs during the window (it deletes its canary).
	gcCanary(t, w, "during")
	if err := w.configMap(w.NS, "fast"); err != nil {
		t.Fatalf("a second ConfigMap within the limit of 2 while the slow one is held: %v", err)
	}
	err = w.configMap(w.NS, "over")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a third ConfigMap while the slow create holds a unit: want 403, got %v", err)
	}
	wg.Wait()
	if slowErr != nil {
		t.Fatalf("the slow create: %v", slowErr)
	}
	if held := time.Since(began); held < delay {
		t.Fatalf("the slow create ended after %s, before its %s delay", held, delay)
	}

	// Stored: exactly one granted claim each, owned by its object; the
	// collector keeps them; the tenant cannot delete them.
	slow := &corev1.ConfigMap{}
	if err := w.C.Get(ctx, client.ObjectKey{Namespace: w.NS, Name: "slow"}, slow); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "both ConfigMaps with their granted claims", func() bool {
		stored, un := w.uncharged(w.NS, w.NS)
		return stored == 2 && len(un) == 0 && len(w.claimsIn(w.NS)) == 2
	})
	gcCanary(t, w, "after")
	claims := w.claimsIn(w.NS)
	if len(claims) != 2 || grantedFor(claims, string(slow.UID)) != 1 {
		t.Fatalf("after the collector ran: %d claims, %d granted for the slow ConfigMap; want 2 and 1", len(claims), grantedFor(claims, string(slow.UID)))
	}
	for _, c := range claims {
		if c.Annotations[quotav1alpha1.AnnotationResourceUID] == string(slow.UID) &&
			(len(c.OwnerReferences) != 1 || c.OwnerReferences[0].UID != slow.UID) {
			t.Errorf("the slow ConfigMap's claim %s is not owned by it: %v", c.Name, c.OwnerReferences)
		}
	}
	err = tenant.Delete(ctx, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: w.NS, Name: "slow-units"}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant deleting the claim of the stored slow ConfigMap: want 403, got %v", err)
	}
	mustContain(t, err, "ConfigMap "+w.NS+"/slow", "delete that object")
	w.WaitBucket(quotatest.N(2, 2, 0), "units")

	// A slow create whose client gave up: its deadline (2 s) passes inside
	// the delay, the storage refuses the expired request, the grant is
	// released; nothing is stored uncharged and nothing is held for nothing.
	if err := w.C.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: w.NS}}); err != nil {
		t.Fatal(err)
	}
	w.WaitBucket(quotatest.N(2, 1, 1), "units")
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	err = kube.CoreV1().RESTClient().Post().Namespace(w.NS).Resource("configmaps").Timeout(2 * time.Second).MaxRetries(0).
		Body(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gave-up"}}).Do(ctx).Error()
	if err == nil {
		t.Fatal("a create with a 2 s deadline held 6 s answered success")
	}
	t.Logf("the create that gave up answered: %v", err)
	eventually(t, 30*time.Second, "the given-up create settled: stored and claimed, or neither", func() bool {
		stored, un := w.uncharged(w.NS, w.NS)
		b := &quotav1alpha1.AllowanceBucket{}
		if len(un) != 0 || w.C.Get(ctx, client.ObjectKey{Namespace: w.BucketNS, Name: w.BucketName("units")}, b) != nil {
			return false
		}
		return b.Status.Allocated == int64(stored) && len(w.claimsIn(w.NS)) == stored && time.Since(began) > delay
	})
	stored, _ := w.uncharged(w.NS, w.NS)
	t.Logf("after the given-up create: %d ConfigMaps stored, all charged, the bucket allocating exactly them", stored)
	if err := w.configMap(w.NS, "last"); err != nil && stored < 2 {
		t.Fatalf("the unit freed by the given-up create was not given back: %v", err)
	}
}

// impersonatedTenant is a client acting as user, who may create and read
// ConfigMaps in the world's namespace and holds quotaplane's tenant role
// there (claims: get, list, watch, create, delete).
func impersonatedTenant(t *testing.T, w *world, user string) client.Client {
	t.Helper()
	ctx := context.Background()
	subject := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: w.NS}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list", "delete"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: w.NS}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quota-user", Namespace: w.NS}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane-quota-user"}},
	} {
		if err := w.C.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	// RBAC authorizes from its cache: act as user once it has both bindings.
	quotatest.WaitAllowed(t, []kubernetes.Interface{kubernetes.NewForConfigOrDie(srv.Config)}, user, nil,
		&authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: w.NS},
		&authorizationv1.ResourceAttributes{Verb: "list", Group: quotav1alpha1.GroupName, Resource: "resourceclaims", Namespace: w.NS})
	return quotatest.NewClient(t, cfg)
}

// gcCanary creates a Secret (not charged) owned by an object that does not exist and
// waits until the garbage collector deletes it: proof the collector has
// processed the namespace since.
func gcCanary(t *testing.T, w *world, name string) {
	t.Helper()
	canary := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gc-canary-" + name, Namespace: w.NS,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "absent", UID: uuid.NewUUID()}}}}
	if err := w.C.Create(context.Background(), canary); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("the garbage collector deleting its canary %s", canary.Name), func() bool {
		return apierrors.IsNotFound(w.C.Get(context.Background(), client.ObjectKeyFromObject(canary), &corev1.Secret{}))
	})
}
