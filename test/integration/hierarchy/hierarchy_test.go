// Package hierarchy tests quota at several levels against the real server:
// projects under their organization's cap, label-selected groups, and the
// budget an organization's owners split among their projects
// (docs/conditions.md "Levels").
package hierarchy

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}

var seq atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, seq.Add(1))
}

// world is one organization with projects, a resource type charged to
// Projects and a level up to Organizations, and an owner of the
// organization who is a service account with only the shipped
// organization-owner role (and update on its own projects).
type world struct {
	t     *testing.T
	admin client.Client
	kube  kubernetes.Interface
	org   string
	ns    string
	rt    string
	owner client.Client
	// ownerCfg is the owner's client configuration (its token).
	ownerCfg *rest.Config
	projects []string
}

func newWorld(t *testing.T, projects ...string) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{t: t, admin: quotatest.NewClient(t, srv.Config), kube: kubernetes.NewForConfigOrDie(srv.Config), org: uniq("acme")}
	w.ns = rmv1alpha1.OrganizationNamespace(w.org)
	w.rt = fmt.Sprintf("%s.example.com/vcpu", w.org)
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-vcpu"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
	w.create(reg)
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: w.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	w.create(o)
	w.poll("the organization's namespace", func() bool {
		return w.admin.Get(ctx, client.ObjectKey{Name: w.ns}, &corev1.Namespace{}) == nil
	})
	for _, p := range projects {
		name := w.org + "-" + p
		w.create(&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.org}}})
		w.projects = append(w.projects, name)
	}
	w.owner = w.ownerClient()
	return w
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.admin.Create(context.Background(), obj); err != nil {
		w.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (w *world) poll(what string, ok func() bool) {
	w.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// ownerClient is a service account of the organization's namespace bound
// to the shipped organization-owner role, authenticated by a real token.
func (w *world) ownerClient() client.Client {
	w.t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: w.ns}}
	w.create(sa)
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: w.ns}
	w.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "owner-sa", Namespace: w.ns}, Subjects: []rbacv1.Subject{subject},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rmv1alpha1.OrganizationOwnerRole}})
	// Updating its own projects (their labels), by name.
	w.create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "edit-projects-" + w.org}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"projects"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: w.projects}}})
	w.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "edit-projects-" + w.org}, Subjects: []rbacv1.Subject{subject},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit-projects-" + w.org}})
	tok, err := w.kube.CoreV1().ServiceAccounts(w.ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = tok.Status.Token
	w.ownerCfg = cfg
	c := quotatest.NewClient(w.t, cfg)
	// RBAC authorizes from a cache: act as the owner once it has both
	// bindings; and once the server's cache of service accounts has this
	// one, which its token is authenticated by.
	user, groups := quotatest.ServiceAccountUser(w.ns, sa.Name)
	edit := &authorizationv1.ResourceAttributes{Verb: "update", Group: rmv1alpha1.GroupName, Resource: "projects"}
	if len(w.projects) > 0 {
		edit.Name = w.projects[0]
	}
	quotatest.WaitAllowed(w.t, []kubernetes.Interface{w.kube}, user, groups,
		&authorizationv1.ResourceAttributes{Verb: "list", Group: quotav1alpha1.GroupName, Resource: "allowancebuckets", Namespace: w.ns}, edit)
	w.poll("the owner's token", func() bool {
		return c.List(ctx, &quotav1alpha1.AllowanceBucketList{}, client.InNamespace(w.ns)) == nil
	})
	return c
}

func (w *world) consumer(kind, name string) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}
}

func (w *world) grant(ns, name string, consumer quotav1alpha1.ConsumerRef, amounts ...int64) *quotav1alpha1.ResourceGrant {
	var buckets []quotav1alpha1.GrantBucket
	for _, a := range amounts {
		buckets = append(buckets, quotav1alpha1.GrantBucket{Amount: a})
	}
	return &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(w.rt), Buckets: buckets}}}}
}

// waitActive waits until a grant counts.
func (w *world) waitActive(g *quotav1alpha1.ResourceGrant) {
	w.t.Helper()
	w.poll("grant "+g.Name+" to be active", func() bool {
		got := &quotav1alpha1.ResourceGrant{}
		return w.admin.Get(context.Background(), client.ObjectKeyFromObject(g), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.GrantConditionActive) && got.Status.ObservedGeneration == got.Generation
	})
}

func (w *world) claim(name, project string, amount int64) *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: w.consumer("Project", project),
		Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(w.rt), Amount: amount}}}}
}

// decided waits until a claim is decided and returns its Granted condition.
func (w *world) decided(c *quotav1alpha1.ResourceClaim) metav1.Condition {
	w.t.Helper()
	var cond *metav1.Condition
	w.poll("claim "+c.Name+" to be decided", func() bool {
		got := &quotav1alpha1.ResourceClaim{}
		if w.admin.Get(context.Background(), client.ObjectKeyFromObject(c), got) != nil {
			return false
		}
		cond = meta.FindStatusCondition(got.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
		return cond != nil && cond.Reason != quota.ReasonPending
	})
	return *cond
}

// bucket waits until the bucket of a consumer shows allocated.
func (w *world) bucket(ns string, consumer quota.ConsumerID, allocated int64) *quotav1alpha1.AllowanceBucket {
	w.t.Helper()
	name := quota.BucketName(quota.BucketID{Consumer: consumer, ResourceType: w.rt})
	b := &quotav1alpha1.AllowanceBucket{}
	w.poll(fmt.Sprintf("bucket %s/%s to show %d allocated", ns, name, allocated), func() bool {
		return w.admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b) == nil && b.Status.Allocated == allocated
	})
	return b
}

func projectID(name string) quota.ConsumerID {
	return quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: name}
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q lacks %q", s, p)
		}
	}
}

// TestOrganizationCapsItsProjects: each project has room, the organization
// does not; the refusal names every level and the one that refused.
func TestOrganizationCapsItsProjects(t *testing.T) {
	w := newWorld(t, "web", "api")
	web, api := w.projects[0], w.projects[1]
	for _, g := range []*quotav1alpha1.ResourceGrant{
		w.grant(w.ns, "org", w.consumer("Organization", w.org), 10),
		w.grant(w.ns, "web", w.consumer("Project", web), 8),
		w.grant(w.ns, "api", w.consumer("Project", api), 8),
	} {
		w.create(g)
		w.waitActive(g)
	}
	for i, c := range []*quotav1alpha1.ResourceClaim{w.claim("w1", web, 6), w.claim("a1", api, 4)} {
		w.create(c)
		if got := w.decided(c); got.Status != metav1.ConditionTrue {
			t.Fatalf("claim %d: %s %s", i, got.Reason, got.Message)
		}
	}
	last := w.claim("a2", api, 1)
	w.create(last)
	got := w.decided(last)
	if got.Status != metav1.ConditionFalse || got.Reason != quota.ReasonQuotaExceeded {
		t.Fatalf("a claim past the organization's cap: %s %s", got.Reason, got.Message)
	}
	mustContain(t, got.Message, "requested 1 core of "+w.rt+" for Project "+api, "Project "+api+" has 4 of 8 available",
		"Organization "+w.org+" has 0 of 10 available (this limit refused")
	b := w.bucket(w.ns, quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}, 10)
	if b.Status.Limit != 10 || b.Status.Available != 0 {
		t.Errorf("organization bucket %+v", b.Status)
	}
	w.bucket(w.ns, projectID(api), 4)
}

// TestProjectsRaceForTheOrganizationsLastUnits: 4L claims of one unit
// across four projects, all at once, against an organization limit L (each
// project has room for all of them): exactly L are granted, every round.
func TestProjectsRaceForTheOrganizationsLastUnits(t *testing.T) {
	const limit, rounds = 10, 3
	w := newWorld(t, "p0", "p1", "p2", "p3")
	org := w.grant(w.ns, "org", w.consumer("Organization", w.org), limit)
	w.create(org)
	w.waitActive(org)
	for i, p := range w.projects {
		g := w.grant(w.ns, fmt.Sprintf("p%d", i), w.consumer("Project", p), 4*limit)
		w.create(g)
		w.waitActive(g)
	}
	ctx := context.Background()
	for round := range rounds {
		var claims []*quotav1alpha1.ResourceClaim
		for i := range 4 * limit {
			claims = append(claims, w.claim(fmt.Sprintf("r%d-%d", round, i), w.projects[i%4], 1))
		}
		quotatest.ForEach(t, len(claims), func(i int) error { return w.admin.Create(ctx, claims[i]) })
		granted := 0
		for _, c := range claims {
			if w.decided(c).Status == metav1.ConditionTrue {
				granted++
			}
		}
		if granted != limit {
			t.Fatalf("round %d: %d of %d claims granted against the organization's limit %d", round, granted, len(claims), limit)
		}
		w.bucket(w.ns, quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}, limit)
		for _, c := range claims {
			if err := w.admin.Delete(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		w.bucket(w.ns, quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}, 0)
	}
}

// TestGroups: a claim covered by two groups is refused by the more
// restrictive; a project relabelled into a group brings its usage; a
// tenant cannot relabel its project out of a group.
func TestGroups(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "web", "api")
	web, api := w.projects[0], w.projects[1]
	team := "quota.miloapis.com/team-" + w.org
	if err := w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "milo-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	label := func(p, v string) {
		t.Helper()
		// The project's own controller writes it too: a conflict is retried.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			proj := &rmv1alpha1.Project{}
			if err := w.admin.Get(ctx, client.ObjectKey{Name: p}, proj); err != nil {
				return err
			}
			proj.Labels[team] = v
			return w.admin.Update(ctx, proj)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	label(web, "data")
	label(api, "data")
	group := func(name string, amount int64, sel metav1.LabelSelector) *quotav1alpha1.ResourceGrant {
		g := w.grant("milo-system", name, quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"}, amount)
		g.Spec.ConsumerSelector = &sel
		return g
	}
	small := group(w.org+"-team-data", 5, metav1.LabelSelector{MatchLabels: map[string]string{team: "data"}})
	large := group(w.org+"-all", 50, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: team, Operator: metav1.LabelSelectorOpExists}}})
	for _, g := range []*quotav1alpha1.ResourceGrant{w.grant(w.ns, "org", w.consumer("Organization", w.org), 100), small, large} {
		w.create(g)
		w.waitActive(g)
	}
	// A group selecting on a label tenants may set is refused.
	bad := group(w.org+"-bad", 5, metav1.LabelSelector{MatchLabels: map[string]string{"team": "data"}})
	err := w.admin.Create(ctx, bad)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a group selecting on an unreserved label: want invalid, got %v", err)
	}
	mustContain(t, err.Error(), "spec.consumerSelector.matchLabels[team]", "only the platform may set")

	w1 := w.claim("w1", web, 4)
	w.create(w1)
	if got := w.decided(w1); got.Status != metav1.ConditionTrue {
		t.Fatalf("w1: %s", got.Message)
	}
	a1 := w.claim("a1", api, 2)
	w.create(a1)
	got := w.decided(a1)
	if got.Status != metav1.ConditionFalse {
		t.Fatalf("a claim past the small group's cap was granted")
	}
	mustContain(t, got.Message, "group "+small.Name+" has 1 of 5 available (this limit refused", "group "+large.Name+" has 46 of 50 available",
		"Organization "+w.org+" has 96 of 100 available")
	if strings.Contains(got.Message, web) {
		t.Errorf("the denial names another member of the group: %q", got.Message)
	}

	// The group's bucket is projected into the organization's namespace,
	// where the owner reads it; the platform namespace stays closed.
	groupID := func(g *quotav1alpha1.ResourceGrant) quota.ConsumerID { return quota.GroupID(g.Namespace, g.Name) }
	projected := quota.BucketName(quota.BucketID{Consumer: groupID(small), ResourceType: w.rt})
	pb := &quotav1alpha1.AllowanceBucket{}
	w.poll("the small group's bucket projected into "+w.ns, func() bool {
		return w.owner.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: projected}, pb) == nil && pb.Status.Allocated == 4
	})
	if pb.Status.Limit != 5 || pb.Status.Available != 1 || pb.Labels[quotav1alpha1.LabelProjectedFrom] != "milo-system" {
		t.Errorf("projected group bucket: limit %d available %d labels %v", pb.Status.Limit, pb.Status.Available, pb.Labels)
	}
	if err := w.owner.List(ctx, &quotav1alpha1.AllowanceBucketList{}, client.InNamespace("milo-system")); !apierrors.IsForbidden(err) {
		t.Errorf("the owner listing the platform namespace's buckets: want 403, got %v", err)
	}

	// The tenant cannot take its project out of the group.
	tenantEdit := func(edit func(*rmv1alpha1.Project)) error {
		var err error
		for range 5 { // a conflict with the project's controller is retried
			proj := &rmv1alpha1.Project{}
			if err = w.owner.Get(ctx, client.ObjectKey{Name: web}, proj); err != nil {
				t.Fatal(err)
			}
			edit(proj)
			if err = w.owner.Update(ctx, proj); !apierrors.IsConflict(err) {
				return err
			}
		}
		return err
	}
	err = tenantEdit(func(p *rmv1alpha1.Project) { p.Labels[team] = "none" })
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant relabelling its project out of a group: want 403, got %v", err)
	}
	mustContain(t, err.Error(), "metadata.labels["+team+"]", "only by the platform")
	if err := tenantEdit(func(p *rmv1alpha1.Project) { delete(p.Labels, team) }); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant removing the group's label: want 403, got %v", err)
	}

	// The platform moves web out: its usage leaves the group, a1 fits.
	label(web, "web")
	w.bucket("milo-system", groupID(small), 2)
	if got := w.decided(a1); got.Status != metav1.ConditionTrue {
		t.Fatalf("a1 after web left the group: %s", got.Message)
	}
	// And back in: allocated follows, over the limit, nothing revoked.
	label(web, "data")
	b := w.bucket("milo-system", groupID(small), 6)
	over := meta.FindStatusCondition(b.Status.Conditions, quotav1alpha1.BucketConditionOverLimit)
	if over == nil || over.Status != metav1.ConditionTrue {
		t.Errorf("the group at 6 of 5 does not show OverLimit: %+v", b.Status.Conditions)
	}
	w.bucket("milo-system", groupID(large), 6)

	// Once no project of the organization is in the group, its copy goes.
	label(web, "web")
	label(api, "web")
	w.poll("the small group's copy to leave "+w.ns, func() bool {
		return apierrors.IsNotFound(w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: projected}, &quotav1alpha1.AllowanceBucket{}))
	})
}

// TestDelegatedBudget: the organization's owner splits its limit among its
// projects, within its budget, and can do nothing else with grants.
func TestDelegatedBudget(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "web", "api")
	web, api := w.projects[0], w.projects[1]
	other := newWorld(t, "x")
	org := w.grant(w.ns, "org", w.consumer("Organization", w.org), 10)
	w.create(org)
	w.waitActive(org)

	d1 := w.grant(w.ns, "web-quota", w.consumer("Project", web), 6)
	if err := w.owner.Create(ctx, d1); err != nil {
		t.Fatalf("the owner delegating 6 of 10: %v", err)
	}
	if d1.Labels[quotav1alpha1.BudgetLabel] != w.org {
		t.Errorf("a delegated grant is labelled %v", d1.Labels)
	}
	err := w.owner.Create(ctx, w.grant(w.ns, "api-quota", w.consumer("Project", api), 5))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("delegating 5 with 4 left: want 403, got %v", err)
	}
	mustContain(t, err.Error(), "only 4 of it is left", "the limit 10", "6 is given", "platform administrators", "not stored")
	// The platform's grant for a project is outside the budget.
	if err := w.admin.Create(ctx, w.grant(w.ns, "platform-api", w.consumer("Project", api), 50)); err != nil {
		t.Fatalf("the platform granting a project beyond the budget: %v", err)
	}

	// What the owner may not do with grants.
	for _, tc := range []struct {
		what string
		do   func() error
		want []string
	}{
		{"raise its organization's limit", func() error {
			g := &quotav1alpha1.ResourceGrant{}
			if err := w.owner.Get(ctx, client.ObjectKeyFromObject(org), g); err != nil {
				return err
			}
			g.Spec.Allowances[0].Buckets[0].Amount = 1000
			return w.owner.Update(ctx, g)
		}, []string{"written by the platform"}},
		{"delete its organization's grant", func() error { return w.owner.Delete(ctx, org.DeepCopy()) }, []string{"written by the platform"}},
		{"name its organization", func() error {
			return w.owner.Create(ctx, w.grant(w.ns, "self", w.consumer("Organization", w.org), 1000))
		}, []string{"only the platform sets Organization " + w.org}},
		{"name another organization", func() error {
			return w.owner.Create(ctx, w.grant(w.ns, "other", w.consumer("Organization", other.org), 1000))
		}, []string{"spec.consumerRef.name", "may name only Organization " + w.org}},
		{"name another organization's project", func() error {
			return w.owner.Create(ctx, w.grant(w.ns, "steal", w.consumer("Project", other.projects[0]), 1))
		}, []string{"spec.consumerRef.name", "belongs to Organization " + other.org}},
		{"write a grant in another organization's namespace", func() error {
			return w.owner.Create(ctx, w.grant(other.ns, "in-other", w.consumer("Project", other.projects[0]), 1))
		}, []string{"forbidden"}},
		{"read another organization's buckets", func() error {
			return w.owner.List(ctx, &quotav1alpha1.AllowanceBucketList{}, client.InNamespace(other.ns))
		}, []string{"forbidden"}},
	} {
		err := tc.do()
		if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
			t.Errorf("the owner could %s: %v", tc.what, err)
			continue
		}
		mustContain(t, err.Error(), tc.want...)
	}
	// A grant in a namespace that is neither the platform's nor an
	// organization's is refused, whoever writes it.
	if err := w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "loose-" + w.org}}); err != nil {
		t.Fatal(err)
	}
	err = w.admin.Create(ctx, w.grant("loose-"+w.org, "loose", w.consumer("Organization", w.org), 1000))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a grant in an ordinary namespace: want invalid, got %v", err)
	}
	mustContain(t, err.Error(), "metadata.namespace", "platform namespace")

	// Lowering is always allowed; the room it frees can be given.
	g := &quotav1alpha1.ResourceGrant{}
	if err := w.owner.Get(ctx, client.ObjectKeyFromObject(d1), g); err != nil {
		t.Fatal(err)
	}
	g.Spec.Allowances[0].Buckets[0].Amount = 2
	if err := w.owner.Update(ctx, g); err != nil {
		t.Fatalf("lowering a delegated grant: %v", err)
	}
	// Until the engine has seen the lowered grant stored, the larger amount
	// stays held (a lowering in flight might yet fail): retry a moment.
	w.poll("delegating 8 after lowering web's grant to 2", func() bool {
		return w.owner.Create(ctx, w.grant(w.ns, "api-quota", w.consumer("Project", api), 8)) == nil
	})
}

// TestConcurrentDelegatedGrantsNeverExceedTheBudget: 4L grants of one unit,
// all at once, against a budget L: exactly L are stored.
func TestConcurrentDelegatedGrantsNeverExceedTheBudget(t *testing.T) {
	const limit = 10
	ctx := context.Background()
	w := newWorld(t, "p0", "p1")
	org := w.grant(w.ns, "org", w.consumer("Organization", w.org), limit)
	w.create(org)
	w.waitActive(org)
	var stored, refused atomic.Int64
	quotatest.ForEach(t, 4*limit, func(i int) error {
		err := w.owner.Create(ctx, w.grant(w.ns, fmt.Sprintf("g%d", i), w.consumer("Project", w.projects[i%2]), 1))
		switch {
		case err == nil:
			stored.Add(1)
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "insufficient budget"):
			refused.Add(1)
		default:
			return err
		}
		return nil
	})
	list := &quotav1alpha1.ResourceGrantList{}
	if err := w.admin.List(ctx, list, client.InNamespace(w.ns), client.MatchingLabels{quotav1alpha1.BudgetLabel: w.org}); err != nil {
		t.Fatal(err)
	}
	if stored.Load() != limit || len(list.Items) != limit || refused.Load() != 3*limit {
		t.Fatalf("%d grants stored (%d listed), %d refused; want exactly %d of %d within the budget", stored.Load(), len(list.Items), refused.Load(), limit, 4*limit)
	}
}

// TestBudgetSumsNeverWrap: grants summing past the largest integer
// saturate; a budget given in full refuses the next unit.
func TestBudgetSumsNeverWrap(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "p0")
	for _, name := range []string{"org-a", "org-b"} {
		g := w.grant(w.ns, name, w.consumer("Organization", w.org), math.MaxInt64)
		w.create(g)
		w.waitActive(g)
	}
	big := w.grant(w.ns, "big", w.consumer("Project", w.projects[0]), math.MaxInt64, math.MaxInt64)
	big.Spec.Allowances[0].Buckets[1].Dimensions = []quotav1alpha1.Dimension{{Key: "region", Value: "a"}}
	if err := w.owner.Create(ctx, big); err != nil {
		t.Fatalf("delegating the whole (saturated) budget: %v", err)
	}
	err := w.owner.Create(ctx, w.grant(w.ns, "one-more", w.consumer("Project", w.projects[0]), 1))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("one unit past a budget given in full: want 403, got %v", err)
	}
	mustContain(t, err.Error(), "only 0 of it is left", fmt.Sprintf("the limit %d", int64(math.MaxInt64)))
	name := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}, ResourceType: w.rt})
	b := &quotav1alpha1.AllowanceBucket{}
	w.poll("the organization's bucket to show both grants", func() bool {
		return w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, b) == nil && len(b.Status.ContributingGrantRefs) == 2
	})
	if b.Status.Limit != math.MaxInt64 || b.Status.Available != math.MaxInt64 {
		t.Errorf("two grants of MaxInt64 make a limit of %d (available %d), want both saturated at %d", b.Status.Limit, b.Status.Available, int64(math.MaxInt64))
	}
}
