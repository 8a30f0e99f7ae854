package tenancy

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestOwnerChargesTheirOrganizationForProjects: with a ClaimCreationPolicy
// charging each Project to its organization, the owner of beta — bound only
// by what the organization controller made, which includes the verb claim on
// beta — creates projects in beta up to its limit, the next is refused with
// the quota message, deleting one frees its unit; acme stays out of reach.
func TestOwnerChargesTheirOrganizationForProjects(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	f.RegisterClaimedBy([]string{"projects"}, quotav1alpha1.ClaimingResource{APIGroup: rmv1alpha1.GroupName, Kind: "Project"})
	user := uniq("beta-owner")
	allowCreatingOrganizations(t, admin, user)
	owner := asUser(t, user)

	acme, beta := newOrganization(uniq("acme")), newOrganization(uniq("beta"))
	if err := admin.Create(ctx, acme); err != nil {
		t.Fatal(err)
	}
	if err := owner.Create(ctx, beta); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, beta, metav1.ConditionTrue)
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "projects", Namespace: rmv1alpha1.OrganizationNamespace(beta.Name)},
		Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: beta.Name},
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: f.RT("projects"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 2}}}}}}
	if err := admin.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)

	p := f.Policy("projects", rmv1alpha1.SchemeGroupVersion.String(), "Project", "projects", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf(
			"has(trigger.metadata.labels) && 'test' in trigger.metadata.labels && trigger.metadata.labels['test'] == %q", f.ID)}}
		p.Spec.Target.ResourceClaimTemplate.Metadata = quotav1alpha1.TemplateMetadata{
			GenerateName: "project-{{ trigger.metadata.name }}-", Namespace: "organization-{{ trigger.spec.ownerRef.name }}"}
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{
			APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: "{{ trigger.spec.ownerRef.name }}"}
	})
	project := func(name, org string) *rmv1alpha1.Project {
		pr := newProject(name, org)
		pr.Labels = map[string]string{"test": f.ID}
		return pr
	}
	f.WaitPolicyReady(p, metav1.ConditionTrue, project("in-force-probe", beta.Name))

	first, second := project(uniq("one"), beta.Name), project(uniq("two"), beta.Name)
	for _, pr := range []*rmv1alpha1.Project{first, second} {
		if err := owner.Create(ctx, pr); err != nil {
			t.Fatalf("beta's owner creating project %s in beta (limit 2): %v", pr.Name, err)
		}
	}
	err := owner.Create(ctx, project(uniq("three"), beta.Name))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a third project in beta, over its limit of 2: want 403, got %v", err)
	}
	mustContain(t, err, "Insufficient quota resources available", "Organization.resourcemanager.miloapis.com "+beta.Name, "limit 2")

	err = owner.Create(ctx, project(uniq("intruder"), acme.Name))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta's owner creating a project in acme: want 403, got %v", err)
	}

	// Deleting a project frees its unit.
	if err := admin.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := project(uniq("again"), beta.Name)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = owner.Create(ctx, again)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("a project in beta after one was deleted: %v", last)
	}
	// The new project's claim is written once its create has ended, and
	// the deleted project's claim goes with the garbage collector.
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := admin.List(ctx, claims, client.InNamespace(rmv1alpha1.OrganizationNamespace(beta.Name))); err != nil {
			return false, nil
		}
		return len(claims.Items) == 2, nil
	}); err != nil {
		t.Errorf("%d claims in beta's namespace, want 2 (one per project)", len(claims.Items))
	}
}
