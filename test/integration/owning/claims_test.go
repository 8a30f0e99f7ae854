package owning

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// service is an owning service's claimer over a fixture: its claims in the
// fixture's namespace, charged to the fixture's organization, for
// ConfigMaps standing for its resources.
type service struct {
	t       *testing.T
	f       *quotatest.Fixture
	kube    kubernetes.Interface
	quota   versioned.Interface
	claimer *quotaclaim.Claimer
}

func newService(t *testing.T, limit int64) *service {
	t.Helper()
	ctx := context.Background()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"cpu"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	f.Grant("g", map[string][]quotatest.Bucket{"cpu": {{Amount: limit}}})
	me, err := quotaclaim.WhoAmI(ctx, srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := &service{t: t, f: f, kube: kubernetes.NewForConfigOrDie(srv.Config), quota: versioned.NewForConfigOrDie(srv.Config)}
	s.claimer = &quotaclaim.Claimer{Client: s.quota, Namespace: f.NS, Service: "compute", Identity: me, OwnerReferences: true}
	return s
}

// resource stores an owner: a ConfigMap standing for a machine.
func (s *service) resource(name string) quotaclaim.Owner {
	s.t.Helper()
	cm, err := s.kube.CoreV1().ConfigMaps(s.f.NS).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return quotaclaim.OwnerOf(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
}

func (s *service) cpu(n int64) []quotav1alpha1.ResourceRequest {
	return []quotav1alpha1.ResourceRequest{{ResourceType: s.f.RT("cpu"), Amount: n}}
}

// decided waits until owner's claim is decided and returns the decision.
func (s *service) decided(owner quotaclaim.Owner, want quotaclaim.Phase) quotaclaim.Status {
	s.t.Helper()
	var st quotaclaim.Status
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var found bool
		var err error
		st, found, err = s.claimer.Get(ctx, owner)
		return err == nil && found && st.Phase == want, nil
	})
	if err != nil {
		_, found, gerr := s.claimer.Get(context.Background(), owner)
		s.t.Fatalf("the claim of %s is %s (%s: %s; found %v, %v), want %s", owner.Name, st.Phase, st.Reason, st.Message, found, gerr, want)
	}
	return st
}

func (s *service) claimsOf(owner quotaclaim.Owner) int {
	s.t.Helper()
	list, err := s.quota.QuotaV1alpha1().ResourceClaims(s.f.NS).List(context.Background(), metav1.ListOptions{LabelSelector: quotaclaim.LabelOwnerUID + "=" + string(owner.UID)})
	if err != nil {
		s.t.Fatal(err)
	}
	return len(list.Items)
}

// Ensure called many times at once, and again by a new Claimer as after a
// crash between creating the claim and provisioning, makes one claim, named
// from the owner's UID, granted once; the owner's condition follows it.
func TestEnsureMakesOneClaim(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 10)
	owner := s.resource("vm-1")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := s.claimer.Ensure(ctx, owner, s.f.Org, s.cpu(4))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Ensure: %v", err)
		}
	}
	st := s.decided(owner, quotaclaim.Granted)
	if st.Claim.Name != "compute-"+string(owner.UID) {
		t.Fatalf("the claim is named %s, want compute-<owner UID>", st.Claim.Name)
	}
	// A restarted service: a new Claimer, the same identity.
	again := *s.claimer
	st, err := again.Ensure(ctx, owner, s.f.Org, s.cpu(4))
	if err != nil || st.Phase != quotaclaim.Granted {
		t.Fatalf("Ensure after a restart: %v, %+v", err, st)
	}
	if n := s.claimsOf(owner); n != 1 {
		t.Fatalf("%d claims for one owner, want 1", n)
	}
	s.f.WaitBucket(quotatest.N(10, 4, 6), "cpu")

	var conds []metav1.Condition
	if !quotaclaim.SetCondition(&conds, 3, st) || conds[0].Type != quotaclaim.ConditionQuotaGranted || conds[0].Status != metav1.ConditionTrue || conds[0].ObservedGeneration != 3 {
		t.Fatalf("the owner's condition: %+v", conds)
	}
	// Asking for other amounts under the same claim is not a silent resize.
	if _, err := again.Ensure(ctx, owner, s.f.Org, s.cpu(5)); !quotaclaim.IsConflict(err) || !strings.Contains(err.Error(), "Resize") {
		t.Fatalf("Ensure with other amounts: want a conflict saying to resize, got %v", err)
	}
}

// A claim created first under the service's name by a tenant (who may
// claim the consumer, and writes a creator annotation naming the service)
// is not adopted: the server recorded the tenant as its creator, Ensure
// returns a conflict naming it, and Release leaves it alone.
func TestASquattedNameIsRefused(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 10)
	owner := s.resource("vm-squat")
	mallory := tenant(t, s.f, "mallory")
	squat := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: s.claimer.Name(owner), Namespace: s.f.NS,
		Labels:      map[string]string{quotaclaim.LabelOwnerUID: string(owner.UID), quotav1alpha1.LabelManagedBy: "compute"},
		Annotations: map[string]string{quotaclaim.AnnotationCreator: s.claimer.Identity}},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: s.f.Org, Requests: s.cpu(4),
			ResourceRef: &quotav1alpha1.ResourceRef{Kind: "ConfigMap", Name: owner.Name, Namespace: owner.Namespace}}}
	stored, err := mallory.QuotaV1alpha1().ResourceClaims(s.f.NS).Create(ctx, squat, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the tenant's claim: %v", err)
	}
	if got := stored.Annotations[quotaclaim.AnnotationCreator]; got != "mallory" {
		t.Fatalf("the server recorded the creator as %q, want mallory (the client's value must be replaced)", got)
	}
	_, err = s.claimer.Ensure(ctx, owner, s.f.Org, s.cpu(4))
	if !quotaclaim.IsConflict(err) || !strings.Contains(err.Error(), "created by mallory") {
		t.Fatalf("Ensure over a squatted name: want a conflict naming mallory, got %v", err)
	}
	// The tenant cannot rewrite the creator afterwards either.
	stored.Annotations[quotaclaim.AnnotationCreator] = s.claimer.Identity
	updated, err := mallory.QuotaV1alpha1().ResourceClaims(s.f.NS).Update(ctx, stored, metav1.UpdateOptions{})
	if err == nil && updated.Annotations[quotaclaim.AnnotationCreator] != "mallory" {
		t.Fatalf("an update changed the creator to %q", updated.Annotations[quotaclaim.AnnotationCreator])
	}
	if err := s.claimer.Release(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := s.quota.QuotaV1alpha1().ResourceClaims(s.f.NS).Get(ctx, squat.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("Release deleted a claim the service did not create: %v", err)
	}
}

// A claim that does not fit is Denied with the refusal's numbers, the
// owner's condition False; when the grant is raised the engine grants it
// and the condition turns True. Release gives the quota back, once.
func TestDeniedThenGrantedThenReleased(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 4)
	first, second := s.resource("vm-a"), s.resource("vm-b")
	if _, err := s.claimer.Ensure(ctx, first, s.f.Org, s.cpu(3)); err != nil {
		t.Fatal(err)
	}
	s.decided(first, quotaclaim.Granted)
	if _, err := s.claimer.Ensure(ctx, second, s.f.Org, s.cpu(3)); err != nil {
		t.Fatal(err)
	}
	st := s.decided(second, quotaclaim.Denied)
	var conds []metav1.Condition
	quotaclaim.SetCondition(&conds, 1, st)
	if conds[0].Status != metav1.ConditionFalse || conds[0].Reason != quotav1alpha1.ClaimReasonQuotaExceeded || !strings.Contains(conds[0].Message, "4") {
		t.Fatalf("the owner's condition while denied: %+v", conds[0])
	}
	g := &quotav1alpha1.ResourceGrant{}
	if err := s.f.C.Get(ctx, client.ObjectKey{Namespace: s.f.NS, Name: "g"}, g); err != nil {
		t.Fatal(err)
	}
	s.f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 6 })
	st = s.decided(second, quotaclaim.Granted)
	quotaclaim.SetCondition(&conds, 1, st)
	if conds[0].Status != metav1.ConditionTrue {
		t.Fatalf("the owner's condition once granted: %+v", conds[0])
	}
	s.f.WaitBucket(quotatest.N(6, 6, 0), "cpu")
	for range 3 {
		if err := s.claimer.Release(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	s.f.WaitBucket(quotatest.N(6, 3, 3), "cpu")
	if n := s.claimsOf(first); n != 0 {
		t.Fatalf("%d claims left after Release", n)
	}
}

// With OwnerReferences, the owner's deletion releases its claim through the
// garbage collector while no service runs.
func TestTheOwnersDeletionReleasesWhileTheServiceIsDown(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 4)
	owner := s.resource("vm-gone")
	if _, err := s.claimer.Ensure(ctx, owner, s.f.Org, s.cpu(2)); err != nil {
		t.Fatal(err)
	}
	s.decided(owner, quotaclaim.Granted)
	s.f.WaitBucket(quotatest.N(4, 2, 2), "cpu")
	if err := s.kube.CoreV1().ConfigMaps(s.f.NS).Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.f.WaitBucket(quotatest.N(4, 0, 4), "cpu")
}

// tenant is a client acting as user name, allowed to create claims in the
// fixture's namespace and to claim its organization.
func tenant(t *testing.T, f *quotatest.Fixture, name string) versioned.Interface {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	role := "squat-" + f.ID
	_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{quotav1alpha1.GroupName}, Resources: []string{"resourceclaims"}, Verbs: []string{"create", "get", "update"}},
		{APIGroups: []string{quota.OrganizationGroup}, Resources: []string{"organizations"}, Verbs: []string{"claim"}, ResourceNames: []string{f.Org.Name}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.RbacV1().RoleBindings(f.NS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: name}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC authorizes from a cache: act as name once it has both bindings.
	quotatest.WaitAllowed(t, []kubernetes.Interface{kube}, name, nil,
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: quota.OrganizationGroup, Resource: "organizations", Name: f.Org.Name},
		&authorizationv1.ResourceAttributes{Verb: "create", Group: quotav1alpha1.GroupName, Resource: "resourceclaims", Namespace: f.NS})
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	return versioned.NewForConfigOrDie(cfg)
}

// Check answers what the next decision is, taking nothing: a claim that
// fits is Granted by Check and then by Ensure; one that does not is Denied
// by both, Check's message naming the same limit; the bucket never moves
// for a Check.
func TestCheckAgreesWithTheNextDecision(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 5)
	first, second := s.resource("chk-a"), s.resource("chk-b")
	st, err := s.claimer.Check(ctx, first, s.f.Org, s.cpu(4))
	if err != nil || st.Phase != quotaclaim.Granted {
		t.Fatalf("Check of 4 of 5: %v, %+v", err, st)
	}
	s.f.WaitBucket(quotatest.N(5, 0, 5), "cpu")
	if _, err := s.claimer.Ensure(ctx, first, s.f.Org, s.cpu(4)); err != nil {
		t.Fatal(err)
	}
	s.decided(first, quotaclaim.Granted)
	st, err = s.claimer.Check(ctx, second, s.f.Org, s.cpu(2))
	if err != nil || st.Phase != quotaclaim.Denied || !strings.Contains(st.Message, "limit 5") {
		t.Fatalf("Check of 2 more: %v, %+v; want Denied naming the limit", err, st)
	}
	s.f.WaitBucket(quotatest.N(5, 4, 1), "cpu")
	if _, err := s.claimer.Ensure(ctx, second, s.f.Org, s.cpu(2)); err != nil {
		t.Fatal(err)
	}
	denied := s.decided(second, quotaclaim.Denied)
	if !strings.Contains(denied.Message, "limit 5") {
		t.Fatalf("the decision after a Denied Check: %+v", denied)
	}
	st, err = s.claimer.Check(ctx, s.resource("chk-c"), s.f.Org, s.cpu(1))
	if err != nil || st.Phase != quotaclaim.Granted {
		t.Fatalf("Check of the last 1: %v, %+v", err, st)
	}
	if n := s.claimsOf(first) + s.claimsOf(second); n != 2 {
		t.Fatalf("%d claims stored; a Check stored one", n)
	}
}

// decidedAny waits until owner's claim is decided, either way.
func (s *service) decidedAny(owner quotaclaim.Owner) quotaclaim.Status {
	s.t.Helper()
	var st quotaclaim.Status
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var found bool
		var err error
		st, found, err = s.claimer.Get(ctx, owner)
		return err == nil && found && st.Phase != quotaclaim.Pending, nil
	})
	if err != nil {
		s.t.Fatalf("the claim of %s was not decided: %+v", owner.Name, st)
	}
	return st
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func waitBrief() { time.Sleep(50 * time.Millisecond) }

// Check reveals a consumer's room only to whoever may charge it: a user
// who may create claims but not claim the organization is refused the dry
// run as the claim itself (403, the verb claim), not told whether it fits.
func TestCheckNeedsTheVerbClaim(t *testing.T) {
	ctx := context.Background()
	s := newService(t, 5)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	role := "eve-" + s.f.ID
	if _, err := kube.RbacV1().Roles(s.f.NS).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{quotav1alpha1.GroupName}, Resources: []string{"resourceclaims"}, Verbs: []string{"create", "get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(s.f.NS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "eve"}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC authorizes from a cache: once it has the binding, the refusal is
	// the verb claim's.
	quotatest.WaitAllowed(t, []kubernetes.Interface{kube}, "eve", nil,
		&authorizationv1.ResourceAttributes{Verb: "create", Group: quotav1alpha1.GroupName, Resource: "resourceclaims", Namespace: s.f.NS})
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "eve", Groups: []string{"system:authenticated"}}
	eve := &quotaclaim.Claimer{Client: versioned.NewForConfigOrDie(cfg), Namespace: s.f.NS, Service: "compute", Identity: "eve"}
	_, err := eve.Check(ctx, s.resource("eve"), s.f.Org, s.cpu(1))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `verb "claim"`) || strings.Contains(err.Error(), "would") {
		t.Fatalf("Check by a user who may not claim the organization: want 403 for the verb claim, got %v", err)
	}
}
