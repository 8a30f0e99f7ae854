package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestHierarchySurvivesKill: quotaplane serve is SIGKILLed while 32 clients
// create ConfigMaps charged to four projects of one organization (limit 30;
// each project's own grant 100), then started again. Afterwards every stored
// ConfigMap has one granted claim, the organization's bucket allocates
// exactly their number and each project's bucket its own, never over the
// organization's limit; creating on until refused fills the organization to
// exactly its limit.
func TestHierarchySurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const limit = 30
	k := serveForKill(t)
	p, c := k.proc, k.c
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	org, rt, projects := killOrganization(t, c, f, "k-", "vcpu", 4, limit)
	pol := f.Policy("vcpu", "v1", "ConfigMap", "vcpu", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "{{ trigger.metadata.labels.project }}"}
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: `has(trigger.metadata.labels) && "project" in trigger.metadata.labels`})
	})
	f.WaitPolicyReady(pol, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.NS, Labels: map[string]string{"project": projects[0]}}})
	// The probe charged projects[0] one unit; it stays.

	var seq atomic.Int64
	cm := func(r *rand.Rand) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", r.Uint32(), seq.Add(1)), Namespace: f.NS,
			Labels: map[string]string{"project": projects[r.IntN(len(projects))]}}}
	}
	created := killAfterSuccesses(t, p, 32, 10, 15, func(r *rand.Rand) error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return c.Create(rctx, cm(r))
	})
	t.Logf("killed after %d admitted creates", created)

	k.restart(t)
	orgID := quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}
	bucketName := func(id quota.ConsumerID) string {
		return quota.BucketName(quota.BucketID{Consumer: id, ResourceType: rt})
	}
	var why string
	check := func(ctx context.Context) (bool, error) {
		cms := &corev1.ConfigMapList{}
		claims := &quotav1alpha1.ResourceClaimList{}
		if c.List(ctx, cms, client.InNamespace(f.NS), client.HasLabels{"project"}) != nil || c.List(ctx, claims, client.InNamespace(f.NS)) != nil {
			why = "not readable yet"
			return false, nil
		}
		perProject := map[string]int64{}
		granted := 0
		for _, cl := range claims.Items {
			if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
				granted++
				perProject[cl.Spec.ConsumerRef.Name]++
			}
		}
		if granted != len(cms.Items) {
			why = fmt.Sprintf("%d ConfigMaps stored, %d granted claims", len(cms.Items), granted)
			return false, nil
		}
		b := &quotav1alpha1.AllowanceBucket{}
		if c.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(org), Name: bucketName(orgID)}, b) != nil || b.Status.Allocated != int64(granted) {
			why = fmt.Sprintf("the organization's bucket allocates %d, %d claims are granted", b.Status.Allocated, granted)
			return false, nil
		}
		for _, pr := range projects {
			pb := &quotav1alpha1.AllowanceBucket{}
			id := quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: pr}
			if c.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(org), Name: bucketName(id)}, pb) != nil || pb.Status.Allocated != perProject[pr] {
				why = fmt.Sprintf("project %s's bucket allocates %d, its granted claims %d", pr, pb.Status.Allocated, perProject[pr])
				return false, nil
			}
		}
		if granted > limit {
			return false, fmt.Errorf("%d claims granted against the organization's limit %d", granted, limit)
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, check); err != nil {
		t.Fatalf("after the restart the levels never matched the stored ConfigMaps: %s (%v)", why, err)
	}
	// Fill the organization: creates succeed until exactly its limit.
	r := rand.New(rand.NewPCG(7, 7))
	for range 2 * limit {
		err := c.Create(ctx, cm(r))
		if apierrors.IsForbidden(err) {
			break
		} else if err != nil && !apierrors.IsTooManyRequests(err) && !apierrors.IsServiceUnavailable(err) {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, check); err != nil {
		t.Fatalf("after filling: %s (%v)", why, err)
	}
	b := &quotav1alpha1.AllowanceBucket{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(org), Name: bucketName(orgID)}, b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Allocated != limit {
		t.Fatalf("filled after the restart, the organization allocates %d of %d", b.Status.Allocated, limit)
	}
}

// TestDelegatedGrantsSurviveKill: quotaplane serve is SIGKILLed while an
// organization's owner (a service account with the shipped role) writes
// grants of one unit for its projects, 32 at a time, against a budget of 20;
// then started again. The grants stored never exceed the budget, the
// budget holds of requests that died are released, and writing on stores
// exactly 20 within a minute.
func TestDelegatedGrantsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const budget = 20
	k := serveForKill(t)
	p, c := k.proc, k.c
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	org := "d-" + f.ID
	ns := rmv1alpha1.OrganizationNamespace(org)
	rt := string(f.RT("vcpu"))
	create := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-vcpu"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}})
	create(&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}})
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) == nil, nil
	}); err != nil {
		t.Fatal("the organization's namespace never appeared")
	}
	project := org + "-p"
	create(&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: project},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}})
	grant := func(name string, ref quotav1alpha1.ConsumerRef, amount int64) *quotav1alpha1.ResourceGrant {
		return &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: ref,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
	}
	create(grant("org", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}, budget))
	owner := ownerOf(t, k.cfg, ns)
	// The organization's grant counts before the burst.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return owner.Create(ctx, grant("probe", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}, 1)) == nil, nil
	}); err != nil {
		t.Fatal("the owner never could delegate one unit")
	}

	var seq atomic.Int64
	projectRef := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}
	written := killAfterSuccesses(t, p, 32, 10, 8, func(r *rand.Rand) error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return owner.Create(rctx, grant(fmt.Sprintf("g-%d", seq.Add(1)), projectRef, 1))
	})
	t.Logf("killed after %d delegated grants", written)
	k.restart(t)

	delegated := func() int {
		list := &quotav1alpha1.ResourceGrantList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{quotav1alpha1.BudgetLabel: org}); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	if n := delegated(); n > budget {
		t.Fatalf("%d delegated grants of one unit stored against a budget of %d", n, budget)
	}
	// Fill the budget: creates succeed until exactly the budget is given.
	// The holds of the requests the kill cut short are released once the
	// new leader has looked their grants up (about 5 s after it starts);
	// until then a create they stand in the way of is refused, never let
	// over the budget, so a refusal below the budget is tried again.
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < 3*budget && time.Now().Before(deadline); i++ {
		err := owner.Create(ctx, grant(fmt.Sprintf("fill-%d", i), projectRef, 1))
		if apierrors.IsForbidden(err) {
			if n := delegated(); n < budget {
				time.Sleep(500 * time.Millisecond) // bounded by the deadline
				continue
			}
			break
		} else if err != nil && !apierrors.IsServiceUnavailable(err) && !apierrors.IsTooManyRequests(err) {
			t.Fatal(err)
		} else if err != nil {
			i--                                // not decided: the new leader is starting
			time.Sleep(100 * time.Millisecond) // bounded by the deadline
		}
	}
	if n := delegated(); n != budget {
		t.Fatalf("after the restart, filling the budget stored %d delegated grants of one unit; want exactly %d", n, budget)
	}
}

// ownerOf is a service account of an organization's namespace bound to the
// shipped organization-owner role, authenticated by a token, once the RBAC
// cache of the replica at admin has the binding.
func ownerOf(t *testing.T, admin *rest.Config, ns string) client.Client {
	t.Helper()
	tok, _ := quotatest.ServiceAccountToken(t, admin, ns, "owner", rmv1alpha1.OrganizationOwnerRole, ns)
	return quotatest.NewClient(t, quotatest.TokenConfig(admin, tok))
}

// killOrganization creates, for a kill test, an Organization (prefix plus
// the fixture's ID) granted limit of the fixture's resource type rtName,
// claimed by ConfigMaps and charged to Projects with their organization as
// parent, and n projects of it, each granted 100. It returns the
// organization, the resource type and the projects.
func killOrganization(t *testing.T, c client.Client, f *quotatest.Fixture, prefix, rtName string, n int, limit int64) (org, rt string, projects []string) {
	t.Helper()
	ctx := context.Background()
	org, rt = prefix+f.ID, string(f.RT(rtName))
	create := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-" + rtName}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}})
	create(&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}})
	grant := func(name string, ref quotav1alpha1.ConsumerRef, amount int64) {
		create(&quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: ref,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}})
	}
	grant("org", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}, limit)
	for i := range n {
		name := fmt.Sprintf("%s-p%d", org, i)
		create(&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}})
		grant(fmt.Sprintf("p%d", i), quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: name}, 100)
		projects = append(projects, name)
	}
	return org, rt, projects
}
