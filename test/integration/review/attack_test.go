package review

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// tenant is an owner of the world's organization who may also write
// ConfigMaps in its apps namespace and charge its projects: what a tenant's
// deployment pipeline holds.
func (w *world) tenant() *rest.Config {
	w.t.Helper()
	cfg := w.token(w.orgNS, "pipeline", rmv1alpha1.OrganizationOwnerRole)
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: "pipeline", Namespace: w.orgNS}
	w.create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "configmaps", Namespace: w.ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch", "update"}}}})
	w.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pipeline", Namespace: w.ns}, Subjects: []rbacv1.Subject{sa},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmaps"}})
	w.create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-claim"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"projects"}, Verbs: []string{"claim"}, ResourceNames: w.projects}}})
	w.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-claim"}, Subjects: []rbacv1.Subject{sa},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: w.org + "-claim"}})
	// RBAC authorizes from a cache: act as the pipeline once it has both.
	user, groups := quotatest.ServiceAccountUser(w.orgNS, "pipeline")
	quotatest.WaitAllowed(w.t, []kubernetes.Interface{w.kube}, user, groups,
		&authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: w.ns},
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: rmv1alpha1.GroupName, Resource: "projects", Name: w.projects[0]})
	return cfg
}

// TestATenantCannotReviewAnotherOrganization: a tenant's review answers
// for what the tenant could apply. Objects in another organization's
// namespace, objects of its own charged to another organization's project,
// and claims against another organization are refused as their apply would
// be, and the answer shows none of the other organization's numbers.
func TestATenantCannotReviewAnotherOrganization(t *testing.T) {
	victim := newWorld(t, "web")
	victim.grant("org", victim.consumer("Organization", victim.org), 40)
	victim.grant("web", victim.consumer("Project", victim.projects[0]), 37)
	victim.ready()
	victim.create(victim.configMap("db", victim.projects[0], 3))

	w := newWorld(t, "web")
	w.grant("org", w.consumer("Organization", w.org), 10)
	w.grant("web", w.consumer("Project", w.projects[0]), 10)
	w.ready()
	tenant := versioned.NewForConfigOrDie(w.tenant())
	ctx := context.Background()

	theirs := victim.configMap("probe-theirs", victim.projects[0], 1)
	mine := w.configMap("mine", w.projects[0], 2)
	mineChargingThem := w.configMap("mine-charging-them", victim.projects[0], 1)
	theirExisting := victim.configMap("db", victim.projects[0], 30)
	claim := &quotav1alpha1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: w.orgNS},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: victim.consumer("Organization", victim.org),
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(victim.rt), Amount: 1}}}}
	var got *quotav1alpha1.QuotaReview
	var err error
	w.poll("the tenant's roles", func() bool {
		got, err = tenant.QuotaV1alpha1().QuotaReviews().Create(ctx, reviewOf(t, mine, theirs, mineChargingThem, theirExisting, claim), metav1.CreateOptions{})
		return err == nil && got.Status.Objects[0].Result == quotav1alpha1.ReviewFits
	})
	st := got.Status
	if !strings.HasPrefix(st.User, "system:serviceaccount:"+w.orgNS+":pipeline") {
		t.Errorf("the review answered for %q, not the tenant", st.User)
	}
	for i, want := range []string{"", "cannot get resource \"configmaps\"", "may not charge quota of Project " + victim.projects[0], "cannot get resource \"configmaps\"", "cannot create resource \"resourceclaims\""} {
		o := st.Objects[i]
		if want == "" {
			continue
		}
		if o.Result != quotav1alpha1.ReviewRefused || o.Reason != quotav1alpha1.ReviewReasonForbidden || !strings.Contains(o.Message, want) {
			t.Errorf("objects[%d] %s: %s %s %q, want Forbidden naming %q", i, o.Name, o.Result, o.Reason, o.Message, want)
		}
		if o.Operation == "Update" {
			t.Errorf("objects[%d]: the review says the victim's %s exists, to a tenant who may not read it", i, o.Name)
		}
		if len(o.Charges) > 0 {
			t.Errorf("objects[%d]: the review shows what it charges the victim: %+v", i, o.Charges)
		}
	}
	for _, b := range st.Buckets {
		if b.ConsumerRef.Name == victim.org || b.ConsumerRef.Name == victim.projects[0] {
			t.Errorf("the tenant's review shows the victim's bucket %+v", b)
		}
	}
	for _, leak := range []string{"of 40", "of 37", " 34 ", victim.rt} {
		if strings.Contains(st.Message, leak) || strings.Contains(objectsText(st), leak) {
			t.Errorf("the tenant's review shows %q of the victim's quota:\n%s", leak, objectsText(st))
		}
	}

	// Reviewing as someone else needs impersonate on them.
	r := reviewOf(t, theirs)
	r.Spec.User = "system:admin"
	r.Spec.Groups = []string{"system:masters"}
	_, err = tenant.QuotaV1alpha1().QuotaReviews().Create(ctx, r, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "impersonate") {
		t.Fatalf("a tenant reviewing as system:masters: %v, want 403 naming impersonate", err)
	}
	// Impersonation headers are the API server's own check.
	asAdmin := rest.CopyConfig(w.tenant2())
	asAdmin.Impersonate = rest.ImpersonationConfig{UserName: "system:admin", Groups: []string{"system:masters"}}
	if _, err := versioned.NewForConfigOrDie(asAdmin).QuotaV1alpha1().QuotaReviews().Create(ctx, reviewOf(t, theirs), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a tenant impersonating system:masters by header: %v, want 403", err)
	}

	// The platform may review as the tenant: the same answer as the tenant's.
	r = reviewOf(t, mine, theirs)
	r.Spec.User = st.User
	r.Spec.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + w.orgNS}
	as, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if as.Status.User != st.User || as.Status.Objects[0].Result != quotav1alpha1.ReviewFits || as.Status.Objects[1].Reason != quotav1alpha1.ReviewReasonForbidden {
		t.Fatalf("reviewed as the tenant by the platform: %+v", as.Status)
	}
	// Nothing the reviews named was created or charged.
	if err := w.admin.Get(ctx, client.ObjectKeyFromObject(mine), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the reviewed ConfigMap exists: %v", err)
	}
	victim.allocated("Project", victim.projects[0], 3)
}

// tenant2 is another identity of the world with no roles but the
// reviewer's.
func (w *world) tenant2() *rest.Config {
	w.t.Helper()
	return w.token(w.orgNS, "nobody", "view")
}

func objectsText(st quotav1alpha1.QuotaReviewStatus) string {
	var b strings.Builder
	for _, o := range st.Objects {
		b.WriteString(o.Message + "\n")
	}
	return b.String()
}

// TestABadReviewIsRefusedOnItsField: a review that cannot be answered is
// refused, 422, on the field, and says what to do.
func TestABadReviewIsRefusedOnItsField(t *testing.T) {
	w := newWorld(t, "web")
	ctx := context.Background()
	many := &quotav1alpha1.QuotaReview{}
	cm := w.configMap("x", w.projects[0], 1)
	one := reviewOf(t, cm).Spec.Objects[0]
	for range quotav1alpha1.MaxReviewObjects + 1 {
		many.Spec.Objects = append(many.Spec.Objects, one)
	}
	noKind := reviewOf(t, cm)
	noKind.Spec.Objects[0].Raw = []byte(`{"apiVersion":"v1","metadata":{"name":"x"}}`)
	noName := reviewOf(t, cm)
	noName.Spec.Objects[0].Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}`)
	groups := reviewOf(t, cm)
	groups.Spec.Groups = []string{"system:masters"}
	for _, c := range []struct {
		name  string
		r     *quotav1alpha1.QuotaReview
		field string
		says  string
	}{
		{"none", &quotav1alpha1.QuotaReview{}, "spec.objects", "at least one"},
		{"too many", many, "spec.objects", "1000"},
		{"no kind", noKind, "spec.objects[0].kind", "names its kind"},
		{"no name", noName, "spec.objects[0].metadata.name", "needs its name"},
		{"groups without a user", groups, "spec.groups", "name the user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, c.r, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want 422", err)
			}
			st := err.(apierrors.APIStatus).Status()
			if st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != c.field || !strings.Contains(st.Details.Causes[0].Message, c.says) {
				t.Fatalf("causes %+v, want %s saying %q", st.Details, c.field, c.says)
			}
		})
	}
	// A kind the server does not serve is a refusal of that object.
	r := reviewOf(t, cm)
	r.Spec.Objects[0].Raw = []byte(`{"apiVersion":"nowhere.example.com/v1","kind":"Gadget","metadata":{"name":"g"}}`)
	got, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := got.Status.Objects[0]; o.Reason != quotav1alpha1.ReviewReasonNotServed || !strings.Contains(o.Message, "Gadget") || got.Status.Fits {
		t.Fatalf("an unserved kind: %+v", got.Status)
	}
}

// TestATenantCannotCarryTheReviewPass: a review's dry runs skip the charging
// steps by the user extra charge.ReviewPassExtra, which only an identity
// allowed to impersonate user extras can set. A tenant that sends it — on a
// dry run charging another tenant's project, or on a real create over its
// own quota — is refused by impersonation before admission, and its real
// create is still charged and refused.
func TestATenantCannotCarryTheReviewPass(t *testing.T) {
	victim := newWorld(t, "web")
	w := newWorld(t, "web")
	w.grant("org", w.consumer("Organization", w.org), 1)
	w.grant("web", w.consumer("Project", w.projects[0]), 1)
	w.ready()
	cfg := w.tenant()
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	w.poll("the tenant's roles", func() bool {
		_, err := kube.CoreV1().ConfigMaps(w.ns).Create(ctx, w.configMap("fits", w.projects[0], 1), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	self := "system:serviceaccount:" + w.orgNS + ":pipeline"
	forged := rest.CopyConfig(cfg)
	forged.Impersonate = rest.ImpersonationConfig{UserName: self, Extra: map[string][]string{charge.ReviewPassExtra: {"true"}}}
	fk := kubernetes.NewForConfigOrDie(forged)
	for _, c := range []struct {
		cm     *corev1.ConfigMap
		dryRun []string
	}{{victim.configMap("charging-them", victim.projects[0], 1), []string{metav1.DryRunAll}}, {w.configMap("over", w.projects[0], 5), nil}} {
		c.cm.Namespace = w.ns
		_, err := fk.CoreV1().ConfigMaps(w.ns).Create(ctx, c.cm, metav1.CreateOptions{DryRun: c.dryRun})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot impersonate") {
			t.Errorf("%s with the review pass (dryRun %v): want 403 cannot impersonate, got %v", c.cm.Name, c.dryRun, err)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(w.ns).Create(ctx, w.configMap("over", w.projects[0], 5), metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Insufficient quota") {
		t.Errorf("the tenant's create over its quota: want the quota refusal, got %v", err)
	}
	if n := len(w.claims()); n != 0 {
		t.Errorf("%d claims after refused creates", n)
	}
}
