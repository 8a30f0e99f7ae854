package hardening

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// tenant is a service account of one organization's namespace, with only
// the roles quotaplane ships (and a role of its own allowing the verb claim
// on its own organization, as docs/authorization.md shows).
type tenant struct {
	org string
	ns  string
	c   client.Client
}

func newTenant(t *testing.T, admin client.Client, kube kubernetes.Interface, org string) *tenant {
	t.Helper()
	ctx := context.Background()
	ns := "organization-" + org
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: ns}}
	if err := admin.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}
	// Claims, ConfigMaps and Secrets in its own namespace only.
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "workloads", Namespace: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create", "get", "list", "delete", "patch", "update"}},
			{APIGroups: []string{quotav1alpha1.GroupName}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"update", "patch"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "workloads", Namespace: ns}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "workloads"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quota-user", Namespace: ns}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane-quota-user"}},
		// The verb claim on its own organization, by name.
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "claim-organization-" + org}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{quota.OrganizationGroup}, Resources: []string{"organizations"}, Verbs: []string{"claim"}, ResourceNames: []string{org}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "claim-organization-" + org}, Subjects: []rbacv1.Subject{subject},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "claim-organization-" + org}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC authorizes from its cache: wait until it has the bindings, or a
	// tenant's own charge could be refused for a moment.
	user, groups := quotatest.ServiceAccountUser(ns, sa.Name)
	quotatest.WaitAllowed(t, []kubernetes.Interface{kube}, user, groups,
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: quota.OrganizationGroup, Resource: "organizations", Name: org},
		&authorizationv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: ns},
		&authorizationv1.ResourceAttributes{Verb: "create", Group: quotav1alpha1.GroupName, Resource: "resourceclaims", Namespace: ns})
	tok, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = tok.Status.Token
	return &tenant{org: org, ns: ns, c: quotatest.NewClient(t, cfg)}
}

// TestATenantCannotSpendAnotherTenantsQuota: a service account of
// organization beta, allowed to create claims in its own namespace only,
// names acme as the consumer — directly, and through a policy that renders
// the consumer from a label it wrote. Both are refused naming the consumer;
// its own organization works; a forged Granted status is refused.
func TestATenantCannotSpendAnotherTenantsQuota(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	f := quotatest.NewFixture(t, admin)
	f.RegisterClaimedBy([]string{"cores"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	acme, beta := "acme-"+f.ID, "beta-"+f.ID
	for _, org := range []string{acme, beta} {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "cores-" + org, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: org},
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: f.RT("cores"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 100}}}}}}
		if err := admin.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	b := newTenant(t, admin, kube, beta)
	// acme's buckets live in its namespace, which the engine does not create.
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "organization-" + acme}}); err != nil {
		t.Fatal(err)
	}
	claim := func(org string, amount int64) *quotav1alpha1.ResourceClaim {
		return &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: "c-", Namespace: b.ns}, Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: org},
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("cores"), Amount: amount}}}}
	}
	err := b.c.Create(ctx, claim(acme, 90))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta claiming acme's cores: want 403, got %v", err)
	}
	mustContain(t, err, "Organization "+acme, `verb "claim"`, "organizations."+quota.OrganizationGroup)
	own := claim(beta, 10)
	if err := b.c.Create(ctx, own); err != nil {
		t.Fatalf("beta claiming its own cores: %v", err)
	}
	// A forged decision is refused: only the engine writes a claim's status.
	// (Sent at the claim's current version: a stale one is refused by the
	// storage's own conflict check before admission is asked.)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		forged := &quotav1alpha1.ResourceClaim{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(own), forged); err != nil {
			return err
		}
		forged.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: "QuotaAvailable", Message: "forged", LastTransitionTime: metav1.Now()}}
		return b.c.Status().Update(ctx, forged)
	})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta writing its claim's status: want 403, got %v", err)
	}

	// Through admission: the policy renders the consumer from a label.
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-by-label"}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", b.ns)}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "{{ trigger.metadata.labels.org }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: string(f.RT("cores")), Amount: intstr.FromInt32(90)}},
	}
	if err := admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	w := &world{f}
	w.WaitPolicyReady(p, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: b.ns, Labels: map[string]string{"org": beta}}})
	err = b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "steal", Namespace: b.ns, Labels: map[string]string{"org": acme}}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta creating a ConfigMap charged to acme: want 403, got %v", err)
	}
	mustContain(t, err, p.Name, "Organization "+acme, `verb "claim"`)
	if err := b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: b.ns, Labels: map[string]string{"org": beta}}}); err != nil {
		t.Fatalf("beta creating a ConfigMap charged to itself: %v", err)
	}
	// An update cannot move the charge to another tenant either.
	err = b.c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: b.ns}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{"org":%q}}}`, acme))))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta relabelling its ConfigMap to charge acme: want 403, got %v", err)
	}
	mustContain(t, err, p.Name, "Organization "+acme, `verb "claim"`)
	mine := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: "mine"}, mine); err != nil || mine.Labels["org"] != beta {
		t.Fatalf("a refused relabelling changed the ConfigMap: %v %v", mine.Labels, err)
	}
	// acme's bucket holds nothing; beta's holds its 10 + 90.
	acmeBucket := &quotav1alpha1.AllowanceBucketList{}
	eventually(t, 15*time.Second, "beta's bucket at 100 and acme's at 0", func() bool {
		if err := admin.List(ctx, acmeBucket); err != nil {
			return false
		}
		seen := 0
		for _, bk := range acmeBucket.Items {
			if bk.Spec.ResourceType != f.RT("cores") {
				continue
			}
			switch bk.Spec.ConsumerRef.Name {
			case acme:
				if bk.Status.Allocated != 0 {
					t.Fatalf("acme's bucket allocates %d", bk.Status.Allocated)
				}
				seen++
			case beta:
				if bk.Status.Allocated == 100 {
					seen++
				}
			}
		}
		return seen == 2
	})
}

// TestAForgedGrantIsNotCounted: a Granted status nobody decided — written
// straight into storage while no engine leads, where the API would refuse it
// — is not counted when the next leader rebuilds: the claim is decided
// again (denied, the limit being taken) and the bucket holds only the
// decided claim.
func TestAForgedGrantIsNotCounted(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 1)
	w.Claim("decided", quotatest.R("units", 1))
	// The engine may see the claim before the grant (two watches) and deny
	// it first; it is decided again once the grant gives room.
	w.WaitBucket(quotatest.N(1, 1, 0), "units")
	if cond := w.Decided("decided"); cond.Status != metav1.ConditionTrue {
		t.Fatalf("the first claim: %+v", cond)
	}
	w.Claim("forged", quotatest.R("units", 1))
	if cond := w.Decided("forged"); cond.Status != metav1.ConditionFalse {
		t.Fatalf("the second claim, over the limit: %+v", cond)
	}

	// No engine leads: another holder takes the Lease.
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	ns := quotatest.FastEngineOptions().SystemNamespace
	setLease := func(holder string, seconds int32) { quotatest.TakeEngineLease(t, kube, ns, holder, seconds) }
	setLease("someone-else", 3600)
	t.Cleanup(func() { setLease("someone-else", 1) })
	eventually(t, 20*time.Second, "the engine to stop leading", func() bool {
		mf, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		return err == nil && strings.Contains(string(mf), "milo_quota_engine_leader 0")
	})

	// The forged decision, straight into etcd (the API refuses it).
	etcd, err := srv.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	k := "/registry/quota.miloapis.com/resourceclaims/" + w.NS + "/forged"
	got, err := etcd.Get(ctx, k)
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("reading the claim from etcd: %v", err)
	}
	// Stored as the storage layer stores it (protobuf); the forgery is
	// written back as JSON, which the storage reads too.
	decoded, _, err := serializer.NewCodecFactory(quotatest.Scheme).UniversalDeserializer().Decode(got.Kvs[0].Value, nil, &quotav1alpha1.ResourceClaim{})
	if err != nil {
		t.Fatal(err)
	}
	c := decoded.(*quotav1alpha1.ResourceClaim)
	c.APIVersion, c.Kind = quotav1alpha1.SchemeGroupVersion.String(), "ResourceClaim"
	c.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue,
		Reason: quotav1alpha1.ClaimReasonQuotaAvailable, Message: "forged", LastTransitionTime: metav1.Now()}}
	c.Status.DecisionSeal = "forged-seal"
	v, _ := json.Marshal(c)
	if _, err := etcd.Put(ctx, k, string(v)); err != nil {
		t.Fatal(err)
	}

	// The engine leads again and rebuilds.
	setLease("someone-else", 1)
	eventually(t, 30*time.Second, "the forged claim decided again (denied)", func() bool {
		cl := w.GetClaim("forged")
		cond := meta.FindStatusCondition(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == quotav1alpha1.ClaimReasonQuotaExceeded
	})
	w.WaitBucket(quotatest.N(1, 1, 0), "units")
}
