package tenancy

import (
	"context"
	"net/http"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/applier"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestProjectBelongsToAnExistingOrganization: a project naming a missing
// organization, or one being deleted, is refused naming spec.ownerRef; one
// naming an existing organization gets its label and ownerReference and is
// Ready; spec.ownerRef cannot change.
func TestProjectBelongsToAnExistingOrganization(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)

	// A project before its organization (one apply of a directory, in any
	// order): a status clients retry, naming the cause — never a final 422.
	missing := uniq("nobody")
	orphan := applier.Unstructured(t, newProject(uniq("orphan"), missing))
	ans := applier.New(t, srv.Config).Apply(ctx, orphan)
	if ans.Code != http.StatusTooManyRequests || ans.RetryAfter == "" {
		t.Fatalf("a project of a missing organization: want 429 with Retry-After, got %d (Retry-After %q): %v", ans.Code, ans.RetryAfter, ans.Err)
	}
	mustContain(t, ans.Err, "spec.ownerRef.name", missing, "does not exist yet", "the organization comes first", "then retry")
	if err := admin.Get(ctx, client.ObjectKey{Name: orphan.GetName()}, &rmv1alpha1.Project{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the refused project was stored: %v", err)
	}

	org := newOrganization(uniq("acme"))
	if err := admin.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	team := newProject(uniq("team"), org.Name)
	team.Spec.OwnerRef.Kind = "Team"
	err := admin.Create(ctx, team)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a project owned by a Team: want 422, got %v", err)
	}
	mustContain(t, err, "spec.ownerRef.kind", `"Organization"`)

	p := newProject(uniq("web"), org.Name)
	if err := admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := p.Labels[rmv1alpha1.OrganizationNameLabel]; got != org.Name {
		t.Errorf("project label %s=%q, want %q", rmv1alpha1.OrganizationNameLabel, got, org.Name)
	}
	if !slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == org.UID && r.Kind == "Organization" }) {
		t.Errorf("project ownerReferences %+v lack Organization %s uid %s", p.OwnerReferences, org.Name, org.UID)
	}
	if c := waitReady(t, admin, p, metav1.ConditionTrue); c.Reason != rmv1alpha1.ProjectReasonReady {
		t.Errorf("project Ready %+v", c)
	}

	// spec.ownerRef is immutable, and the error says so at that path.
	other := newOrganization(uniq("other"))
	if err := admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.OwnerRef.Name = other.Name
		return admin.Update(ctx, p)
	})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("moving a project to another organization: want 422, got %v", err)
	}
	mustContain(t, err, "spec.ownerRef", "immutable")

	// Clients cannot relabel a project into another organization.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Labels[rmv1alpha1.OrganizationNameLabel] = other.Name
		return admin.Update(ctx, p)
	})
	if err != nil || p.Labels[rmv1alpha1.OrganizationNameLabel] != org.Name {
		t.Errorf("relabelling a project: err %v, label now %q; want the label kept at %q", err, p.Labels[rmv1alpha1.OrganizationNameLabel], org.Name)
	}

	// An organization being deleted takes no new project. A finalizer of
	// the test's own holds it in deletion.
	const hold = "test.quotaplane.io/hold"
	held := newOrganization(uniq("closing"))
	held.Finalizers = []string{hold}
	if err := admin.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, held, metav1.ConditionTrue)
	if err := admin.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	err = admin.Create(ctx, newProject(uniq("late"), held.Name))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a project of an organization being deleted: want 422, got %v", err)
	}
	mustContain(t, err, "spec.ownerRef.name", "being deleted")
	if c := waitReady(t, admin, held, metav1.ConditionFalse); c.Reason != rmv1alpha1.OrganizationReasonDeleting {
		t.Errorf("organization being deleted: Ready %+v", c)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(held), held); err != nil {
			return err
		}
		held.Finalizers = slices.DeleteFunc(held.Finalizers, func(s string) bool { return s == hold })
		return admin.Update(ctx, held)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOwnerActsOnlyInTheirOrganization: a user who created organization beta
// — bound only by what the organization controller made — can create a
// project in beta and read beta's grants, and can do neither in acme.
func TestOwnerActsOnlyInTheirOrganization(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	user := uniq("beta-owner")
	allowCreatingOrganizations(t, admin, user)
	owner := asUser(t, user)

	acme := newOrganization(uniq("acme"))
	if err := admin.Create(ctx, acme); err != nil {
		t.Fatal(err)
	}
	beta := newOrganization(uniq("beta"))
	if err := owner.Create(ctx, beta); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, acme, metav1.ConditionTrue)
	waitReady(t, admin, beta, metav1.ConditionTrue)

	err := owner.Create(ctx, newProject(uniq("intruder"), acme.Name))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta's owner creating a project in acme: want 403, got %v", err)
	}
	mustContain(t, err, user, "Organization "+acme.Name, "organizations/projects", rmv1alpha1.OrganizationNamespace(acme.Name), rmv1alpha1.OrganizationOwnerRole)
	err = owner.List(ctx, &quotav1alpha1.ResourceGrantList{}, client.InNamespace(rmv1alpha1.OrganizationNamespace(acme.Name)))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("beta's owner listing acme's grants: want 403, got %v", err)
	}

	p := newProject(uniq("own"), beta.Name)
	if err := owner.Create(ctx, p); err != nil {
		t.Fatalf("beta's owner creating a project in beta: %v", err)
	}
	waitReady(t, admin, p, metav1.ConditionTrue)
	for _, l := range []client.ObjectList{&quotav1alpha1.ResourceGrantList{}, &quotav1alpha1.ResourceClaimList{}, &quotav1alpha1.AllowanceBucketList{}} {
		if err := owner.List(ctx, l, client.InNamespace(rmv1alpha1.OrganizationNamespace(beta.Name))); err != nil {
			t.Errorf("beta's owner listing %T in beta's namespace: %v", l, err)
		}
	}
	got := &rmv1alpha1.Organization{}
	if err := owner.Get(ctx, client.ObjectKeyFromObject(beta), got); err != nil {
		t.Errorf("beta's owner reading beta: %v", err)
	}
	if err := owner.Get(ctx, client.ObjectKeyFromObject(acme), got); !apierrors.IsForbidden(err) {
		t.Errorf("beta's owner reading acme: want 403, got %v", err)
	}
}
