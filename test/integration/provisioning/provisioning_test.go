package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// tenants is a quota world for organizations: a resource type of projects
// per organization, claimed by Projects, and grant policies giving each
// organization a number of projects by its tier label.
type tenants struct {
	*quotatest.Fixture
	rt string
}

func newTenants(t *testing.T) *tenants {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	w := &tenants{Fixture: f, rt: string(f.RT("projects"))}
	for tier, amount := range map[string]int64{"gold": 10, "silver": 2} {
		w.grantPolicy(tier, amount)
	}
	return w
}

// grantPolicy gives amount projects to each organization of the fixture
// labelled tier=<tier>.
func (w *tenants) grantPolicy(tier string, amount int64) *quotav1alpha1.GrantCreationPolicy {
	w.T.Helper()
	p := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.ID + "-" + tier}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Organization"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{
		{Expression: fmt.Sprintf("trigger.metadata.name.startsWith(%q)", w.ID)},
		{Expression: fmt.Sprintf("has(trigger.metadata.labels) && 'tier' in trigger.metadata.labels && trigger.metadata.labels['tier'] == %q", tier)},
	}
	p.Spec.Target.ResourceGrantTemplate.Metadata = quotav1alpha1.TemplateMetadata{
		Name:      "{{ trigger.metadata.name }}-" + tier,
		Namespace: "organization-{{ .trigger.metadata.name }}",
	}
	p.Spec.Target.ResourceGrantTemplate.Spec = quotav1alpha1.ResourceGrantTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "{{ trigger.metadata.name }}"},
		Allowances: []quotav1alpha1.GrantTemplateAllowance{{ResourceType: quotav1alpha1.ResourceType(w.rt),
			Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: amount}}}},
	}
	if err := w.C.Create(context.Background(), p); err != nil {
		w.T.Fatal(err)
	}
	w.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	return p
}

func (w *tenants) organization(name, tier string) *rmv1alpha1.Organization {
	w.T.Helper()
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": tier}},
		Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	if err := w.C.Create(context.Background(), o); err != nil {
		w.T.Fatal(err)
	}
	return o
}

// bucket returns the organization's bucket of projects, once its numbers
// are want.
func (w *tenants) bucket(org string, want quotatest.Nums) {
	w.T.Helper()
	id := quota.BucketID{Consumer: quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: org}, ResourceType: w.rt}
	key := client.ObjectKey{Namespace: "organization-" + org, Name: quota.BucketName(id)}
	var got quotav1alpha1.AllowanceBucket
	w.eventually(30*time.Second, fmt.Sprintf("bucket %s at %+v", key, want), func() bool {
		if err := w.C.Get(context.Background(), key, &got); err != nil {
			return false
		}
		return got.Status.Limit == want.Limit && got.Status.Allocated == want.Allocated && got.Status.Available == want.Available
	}, func() string { return fmt.Sprintf("%+v", got.Status) })
}

func (w *tenants) eventually(timeout time.Duration, what string, ok func() bool, state func() string) {
	w.T.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return ok(), nil
	}); err != nil {
		w.T.Fatalf("not %s after %s; last seen: %s", what, timeout, state())
	}
}

// grantsOf lists the grants in an organization's namespace.
func (w *tenants) grantsOf(org string) []string {
	l := &quotav1alpha1.ResourceGrantList{}
	if err := w.C.List(context.Background(), l, client.InNamespace("organization-"+org)); err != nil {
		return nil
	}
	var names []string
	for _, g := range l.Items {
		if meta.IsStatusConditionTrue(g.Status.Conditions, quotav1alpha1.GrantConditionActive) {
			names = append(names, g.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestAnOrganizationGetsItsQuota: an Organization created gets its namespace,
// its creator's binding as owner and, from its tier's policy, an Active grant
// with the bucket showing the limit — timed, five times. Its label changed
// so that another policy applies: the grants follow.
func TestAnOrganizationGetsItsQuota(t *testing.T) {
	w := newTenants(t)
	var took []time.Duration
	for i := range 5 {
		name := fmt.Sprintf("%s-o%d", w.ID, i)
		began := time.Now()
		w.organization(name, "gold")
		w.bucket(name, quotatest.N(10, 0, 10))
		took = append(took, time.Since(began))
		rb := &rbacv1.RoleBinding{}
		if err := w.C.Get(context.Background(), client.ObjectKey{Namespace: "organization-" + name, Name: rmv1alpha1.OrganizationOwnerBinding}, rb); err != nil {
			t.Fatalf("the owner's RoleBinding of %s: %v", name, err)
		}
		if rb.RoleRef.Name != rmv1alpha1.OrganizationOwnerRole || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "quotaplane-admin" {
			t.Fatalf("the owner's RoleBinding of %s binds %+v to %s; want its creator quotaplane-admin to %s", name, rb.Subjects, rb.RoleRef.Name, rmv1alpha1.OrganizationOwnerRole)
		}
		ns := &corev1.Namespace{}
		if err := w.C.Get(context.Background(), client.ObjectKey{Name: "organization-" + name}, ns); err != nil || ns.Labels[rmv1alpha1.OrganizationNameLabel] != name {
			t.Fatalf("namespace of %s: %v labels %v", name, err, ns.Labels)
		}
	}
	slices.Sort(took)
	t.Logf("organization created → namespace, owner binding, Active grant and bucket at its limit: median %s (min %s, max %s) over %d",
		took[len(took)/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took))
	// The goal, under 1 s, is measured here alone (docs/benchmarks.md §6).
	// Bound 10 s, at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 168 ms here alone (3 runs).
	timed.Within(t, "organization create → namespace, owner binding, Active grant and bucket at its limit, median of 5", took[len(took)/2], 10*time.Second)

	// A tier change: the gold grant goes, the silver one comes.
	name := w.ID + "-o0"
	o := &rmv1alpha1.Organization{}
	if err := w.C.Get(context.Background(), client.ObjectKey{Name: name}, o); err != nil {
		t.Fatal(err)
	}
	o.Labels["tier"] = "silver"
	if err := w.C.Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	want := []string{name + "-silver"}
	w.eventually(30*time.Second, "grants following the tier", func() bool { return slices.Equal(w.grantsOf(name), want) },
		func() string { return strings.Join(w.grantsOf(name), ",") })
	w.bucket(name, quotatest.N(2, 0, 2))
}

// projectPolicy charges one of the fixture's projects to the organization
// each Project names.
func (w *tenants) projectPolicy() {
	w.T.Helper()
	p := w.Policy("projects", rmv1alpha1.SchemeGroupVersion.String(), "Project", "projects", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.spec.ownerRef.name.startsWith(%q)", w.ID)}}
		p.Spec.Target.ResourceClaimTemplate.Metadata.Namespace = "organization-{{ trigger.spec.ownerRef.name }}"
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef.Name = "{{ trigger.spec.ownerRef.name }}"
	})
	probe := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: w.ID + "-probe"},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.ID + "-acme"}}}
	w.WaitPolicyReady(p, metav1.ConditionTrue, probe)
}

func (w *tenants) project(name, org string) error {
	return w.C.Create(context.Background(), &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}})
}

// TestProjectsChargeTheirOrganization: projects are created up to the
// organization's limit, the next is refused with the quota message, and
// deleting one frees its unit. Deleting the organization removes its
// projects, grants, claims and buckets, and a new organization of the same
// name starts with nothing held.
func TestProjectsChargeTheirOrganization(t *testing.T) {
	w := newTenants(t)
	org := w.ID + "-acme"
	w.organization(org, "silver")
	w.bucket(org, quotatest.N(2, 0, 2))
	w.projectPolicy()
	for i := range 2 {
		if err := w.project(fmt.Sprintf("%s-p%d", w.ID, i), org); err != nil {
			t.Fatalf("project %d of 2: %v", i, err)
		}
	}
	w.bucket(org, quotatest.N(2, 2, 0))
	err := w.project(w.ID+"-p2", org)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "requested 1") || !strings.Contains(err.Error(), "0 of the limit 2") {
		t.Fatalf("a third project with a limit of 2: want 403 with the quota message, got %v", err)
	}
	if err := w.C.Delete(context.Background(), &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: w.ID + "-p0"}}); err != nil {
		t.Fatal(err)
	}
	w.bucket(org, quotatest.N(2, 1, 1))
	if err := w.project(w.ID+"-p2", org); err != nil {
		t.Fatalf("a project after one was deleted: %v", err)
	}

	// Deleting the organization: nothing of it is left.
	if err := w.C.Delete(context.Background(), &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}}); err != nil {
		t.Fatal(err)
	}
	left := func() string {
		var out []string
		projects := &rmv1alpha1.ProjectList{}
		if err := w.C.List(context.Background(), projects, client.MatchingLabels{rmv1alpha1.OrganizationNameLabel: org}); err == nil && len(projects.Items) > 0 {
			out = append(out, fmt.Sprintf("%d projects", len(projects.Items)))
		}
		for _, l := range []client.ObjectList{&quotav1alpha1.ResourceGrantList{}, &quotav1alpha1.ResourceClaimList{}, &quotav1alpha1.AllowanceBucketList{}} {
			if err := w.C.List(context.Background(), l, client.InNamespace("organization-"+org)); err == nil && meta.LenList(l) > 0 {
				out = append(out, fmt.Sprintf("%d %T", meta.LenList(l), l))
			}
		}
		if err := w.C.Get(context.Background(), client.ObjectKey{Name: org}, &rmv1alpha1.Organization{}); err == nil {
			out = append(out, "the organization")
		}
		if err := w.C.Get(context.Background(), client.ObjectKey{Name: "organization-" + org}, &corev1.Namespace{}); err == nil {
			out = append(out, "its namespace")
		}
		return strings.Join(out, ", ")
	}
	w.eventually(2*time.Minute, "the organization and all of it gone", func() bool { return left() == "" }, left)

	// A new organization of the same name starts clean.
	w.organization(org, "silver")
	w.bucket(org, quotatest.N(2, 0, 2))
}
