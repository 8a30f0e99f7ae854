package tenancy

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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// TestOrganizationGetsNamespaceAndOwner: an organization created by a user
// gets its namespace (labelled, controlled by it) and a RoleBinding there
// making that user its owner, then Ready. It measures the time from the
// create to both existing (docs/benchmarks.md).
func TestOrganizationGetsNamespaceAndOwner(t *testing.T) {
	quotatest.Exclusive(t)
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	user := uniq("alice")
	allowCreatingOrganizations(t, admin, user)
	alice := asUser(t, user)

	const n = 10
	var took, tookReady []time.Duration
	for i := range n {
		org := newOrganization(uniq("acme"))
		began := time.Now()
		if err := alice.Create(ctx, org); err != nil {
			t.Fatalf("creating organization %s as %s: %v", org.Name, user, err)
		}
		ns, rb := &corev1.Namespace{}, &rbacv1.RoleBinding{}
		err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return admin.Get(ctx, client.ObjectKeyFromObject(namespaceOf(org.Name)), ns) == nil &&
				admin.Get(ctx, client.ObjectKeyFromObject(ownerBinding(org.Name)), rb) == nil, nil
		})
		if err != nil {
			t.Fatalf("organization %s: namespace and owner binding not there within 10s", org.Name)
		}
		took = append(took, time.Since(began))
		waitReady(t, admin, org, metav1.ConditionTrue)
		tookReady = append(tookReady, time.Since(began))

		if i > 0 {
			continue
		}
		// Everything about the first one.
		if err := admin.Get(ctx, client.ObjectKeyFromObject(org), org); err != nil {
			t.Fatal(err)
		}
		if got := org.Annotations[rmv1alpha1.CreatorAnnotation]; got != user {
			t.Errorf("creator annotation %q, want %q", got, user)
		}
		if ns.Labels[rmv1alpha1.OrganizationNameLabel] != org.Name {
			t.Errorf("namespace labels %v, want %s=%s", ns.Labels, rmv1alpha1.OrganizationNameLabel, org.Name)
		}
		if ref := metav1.GetControllerOf(ns); ref == nil || ref.UID != org.UID || ref.Kind != "Organization" {
			t.Errorf("namespace controller %+v, want Organization %s uid %s", ref, org.Name, org.UID)
		}
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		if !slices.Equal(rb.Subjects, wantSubjects) || rb.RoleRef.Name != rmv1alpha1.OrganizationOwnerRole || rb.RoleRef.Kind != "ClusterRole" {
			t.Errorf("owner binding subjects %+v roleRef %+v; want %+v bound to ClusterRole %s", rb.Subjects, rb.RoleRef, wantSubjects, rmv1alpha1.OrganizationOwnerRole)
		}
		c := waitReady(t, admin, org, metav1.ConditionTrue)
		if c.Reason != rmv1alpha1.OrganizationReasonReady || org.Status.Namespace != ns.Name {
			t.Errorf("Ready %+v, status.namespace %q", c, org.Status.Namespace)
		}
		if !slices.Contains(org.Finalizers, rmv1alpha1.OrganizationFinalizer) {
			t.Errorf("finalizers %v lack %s", org.Finalizers, rmv1alpha1.OrganizationFinalizer)
		}
	}
	slices.Sort(took)
	slices.Sort(tookReady)
	t.Logf("organization created → namespace and owner RoleBinding: median %s, max %s; → Ready (the owner's access in force): median %s, max %s; over %d organizations",
		took[n/2].Round(time.Millisecond), took[n-1].Round(time.Millisecond), tookReady[n/2].Round(time.Millisecond), tookReady[n-1].Round(time.Millisecond), n)
	// The goal, well under a second, is measured here alone (docs/tenancy.md).
	// Bound 5 s, at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 28 ms here alone (3 runs).
	timed.Within(t, "organization create → namespace and owner RoleBinding, median of 10", took[n/2], 5*time.Second)
}

// TestCreatorIsRecordedByTheServer: the creator annotation cannot be forged
// at create, nor changed or removed afterwards.
func TestCreatorIsRecordedByTheServer(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	user := uniq("mallory")
	allowCreatingOrganizations(t, admin, user)
	mallory := asUser(t, user)

	forged := newOrganization(uniq("forged"))
	forged.Annotations = map[string]string{rmv1alpha1.CreatorAnnotation: "someone-else"}
	err := mallory.Create(ctx, forged)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating an organization with a forged creator: want 422, got %v", err)
	}
	mustContain(t, err, "metadata.annotations["+rmv1alpha1.CreatorAnnotation+"]", user)

	org := newOrganization(uniq("own"))
	if err := mallory.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	update := func(change func(*rmv1alpha1.Organization)) (*rmv1alpha1.Organization, error) {
		o := &rmv1alpha1.Organization{}
		return o, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(org), o); err != nil {
				return err
			}
			change(o)
			return admin.Update(ctx, o)
		})
	}
	_, err = update(func(o *rmv1alpha1.Organization) { o.Annotations[rmv1alpha1.CreatorAnnotation] = "someone-else" })
	if !apierrors.IsInvalid(err) {
		t.Fatalf("changing the creator annotation: want 422, got %v", err)
	}
	mustContain(t, err, "metadata.annotations["+rmv1alpha1.CreatorAnnotation+"]", "cannot be changed")
	// An update that leaves it out (kubectl replace of the manifest) keeps it.
	kept, err := update(func(o *rmv1alpha1.Organization) {
		delete(o.Annotations, rmv1alpha1.CreatorAnnotation)
		o.Labels = map[string]string{"team": "a"}
	})
	if err != nil {
		t.Fatalf("an update without the creator annotation: %v", err)
	}
	if got := kept.Annotations[rmv1alpha1.CreatorAnnotation]; got != user || kept.Labels["team"] != "a" {
		t.Errorf("after an update without it, creator %q (want %q kept), labels %v (want team=a)", got, user, kept.Labels)
	}
}

// TestOrganizationNameMustFitItsNamespace: names that cannot name the
// namespace organization-<name> are refused, naming metadata.name.
func TestOrganizationNameMustFitItsNamespace(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	long := "o" + strings.Repeat("x", rmv1alpha1.OrganizationNameMaxLength)
	err := admin.Create(ctx, newOrganization(long))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a %d-character name: want 422, got %v", len(long), err)
	}
	mustContain(t, err, "metadata.name: Invalid value", "at most 50")
	err = admin.Create(ctx, newOrganization("dotted.name"))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a name that is not a DNS label: want 422, got %v", err)
	}
	mustContain(t, err, "metadata.name: Invalid value", "must not contain dots", "organization-<name>")

	fits := newOrganization(fmt.Sprintf("%s-%06d", strings.Repeat("y", rmv1alpha1.OrganizationNameMaxLength-7), time.Now().UnixNano()%1_000_000))
	if err := admin.Create(ctx, fits); err != nil {
		t.Fatalf("a %d-character name: %v", len(fits.Name), err)
	}
	waitReady(t, admin, fits, metav1.ConditionTrue)
	if err := admin.Delete(ctx, fits); err != nil {
		t.Fatal(err)
	}

	// A generated name is checked once generated.
	generated := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{GenerateName: "gen-"}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypePersonal}}
	if err := admin.Create(ctx, generated); err != nil {
		t.Fatalf("an organization with generateName: %v", err)
	}
	waitReady(t, admin, generated, metav1.ConditionTrue)
	tooLong := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Repeat("g", 50)}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypePersonal}}
	err = admin.Create(ctx, tooLong)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a generateName that makes a name of 55 characters: want 422, got %v", err)
	}
	mustContain(t, err, "metadata.name", "at most 50")
	if err := admin.Delete(ctx, generated); err != nil {
		t.Fatal(err)
	}
}

// TestDeletingAnOrganizationRemovesEverything: deleting an organization
// deletes its projects and its namespace with the grant and claim in it,
// releases the claim's quota, and only then lets the organization go; a new
// organization of the same name starts with nothing.
func TestDeletingAnOrganizationRemovesEverything(t *testing.T) {
	quotatest.Exclusive(t)
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	f.Register("units")
	name := uniq("gone")
	ns := rmv1alpha1.OrganizationNamespace(name)
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: name}

	// populate creates the organization and gives it a grant of 10 units and
	// a claim of amount, in its namespace, and a project.
	populate := func(amount int64) (*rmv1alpha1.Organization, *quotav1alpha1.ResourceClaim, *rmv1alpha1.Project) {
		t.Helper()
		org := newOrganization(name)
		if err := admin.Create(ctx, org); err != nil {
			t.Fatal(err)
		}
		waitReady(t, admin, org, metav1.ConditionTrue)
		// A new organization of a reused name starts with nothing.
		for _, l := range []client.ObjectList{&quotav1alpha1.ResourceGrantList{}, &quotav1alpha1.ResourceClaimList{}, &quotav1alpha1.AllowanceBucketList{}} {
			if err := admin.List(ctx, l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if n := meta.LenList(l); n != 0 {
				t.Errorf("organization %s starts with %d %T", name, n, l)
			}
		}
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "units", Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: consumer,
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: f.RT("units"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 10}}}}}}
		if err := admin.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "units", Namespace: ns}, Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("units"), Amount: amount}}}}
		if err := admin.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		p := newProject(uniq("proj"), name)
		if err := admin.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitReady(t, admin, p, metav1.ConditionTrue)
		return org, c, p
	}

	org, claim, project := populate(6)
	if c := decided(t, admin, claim); c.Status != metav1.ConditionTrue {
		t.Fatalf("claim of 6 of 10 units: %+v", c)
	}
	began := time.Now()
	if err := admin.Delete(ctx, org); err != nil {
		t.Fatal(err)
	}
	waitGone(t, admin, org, 2*time.Minute)
	t.Logf("organization with a project, a grant and a claim deleted in %s", time.Since(began).Round(time.Millisecond))
	for _, o := range []client.Object{project, namespaceOf(name), claim, ownerBinding(name),
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "quotaplane:organization:" + name}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "quotaplane:organization:" + name}}} {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s outlived its organization (get: %v)", o, client.ObjectKeyFromObject(o), err)
		}
	}

	// Again under the same name: it starts empty, and the old claim's 6
	// units were released, so a claim of all 10 fits.
	_, claim2, _ := populate(10)
	if c := decided(t, admin, claim2); c.Status != metav1.ConditionTrue {
		t.Errorf("a claim of all 10 units after the old organization's 6 were released: %+v", c)
	}
}

// TestDeletedNamespaceIsMadeAgain: the namespace of a live organization,
// deleted by someone, is made again (empty) with the owner's binding.
func TestDeletedNamespaceIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	org := newOrganization(uniq("phoenix"))
	if err := admin.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, org, metav1.ConditionTrue)
	ns := namespaceOf(org.Name)
	if err := admin.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		t.Fatal(err)
	}
	old := ns.UID
	if err := admin.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		fresh := namespaceOf(org.Name)
		return admin.Get(ctx, client.ObjectKeyFromObject(fresh), fresh) == nil && fresh.UID != old && fresh.DeletionTimestamp == nil &&
			admin.Get(ctx, client.ObjectKeyFromObject(ownerBinding(org.Name)), ownerBinding(org.Name)) == nil, nil
	})
	if err != nil {
		t.Fatalf("namespace %s was not made again with its owner binding within a minute", ns.Name)
	}
	waitReady(t, admin, org, metav1.ConditionTrue)
}
