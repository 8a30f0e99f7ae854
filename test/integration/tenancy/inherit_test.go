package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestARecreatedOrganizationInheritsNothing: acme's ConfigMaps live in an
// ordinary namespace, their claims beside them, charged to acme. Before,
// deleting acme completed and another tenant's new acme started at 4 of 5
// allocated, held by the old organization's objects it cannot release. Now
// acme's deletion waits, its condition naming what is still charged to it,
// the name stays taken, and once those objects are gone the new acme starts
// with nothing of the old one.
func TestARecreatedOrganizationInheritsNothing(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	f.RegisterClaimedBy([]string{"units"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	name := uniq("acme")
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: name}
	grant := func() {
		t.Helper()
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "units", Namespace: rmv1alpha1.OrganizationNamespace(name)},
			Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: consumer,
				Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("units"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
		if err := admin.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	}
	org := newOrganization(name)
	if err := admin.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, org, metav1.ConditionTrue)
	grant()
	p := f.Policy("units", "v1", "ConfigMap", "units", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: consumer.APIGroup, Kind: consumer.Kind, Name: name}
	})
	f.WaitPolicyReady(p, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}})
	for i := range 4 {
		if err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: f.NS}}); err != nil {
			t.Fatalf("ConfigMap %d of 4 against a limit of 5: %v", i, err)
		}
	}

	if err := admin.Delete(ctx, org); err != nil {
		t.Fatal(err)
	}
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &rmv1alpha1.Organization{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(org), got); err != nil {
			return false, nil
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, rmv1alpha1.ConditionReady); c != nil {
			msg = c.Message
		}
		return strings.Contains(msg, "ConfigMap "+f.NS+"/c0") && !strings.Contains(msg, "Namespace "), nil
	})
	if err != nil {
		t.Fatalf("the deleted organization does not say what is still charged to it (its namespace gone): %q", msg)
	}
	for i := range 4 {
		if !strings.Contains(msg, fmt.Sprintf("ConfigMap %s/c%d", f.NS, i)) {
			t.Errorf("the condition %q does not name ConfigMap c%d", msg, i)
		}
	}
	if err := admin.Create(ctx, newOrganization(name)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating another organization %s while the old one waits: want AlreadyExists, got %v", name, err)
	}

	for i := range 4 {
		if err := admin.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	waitGone(t, admin, org, time.Minute)

	// Another tenant's acme starts with nothing of the old one.
	user := uniq("new-owner")
	allowCreatingOrganizations(t, admin, user)
	again := newOrganization(name)
	if err := asUser(t, user).Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, again, metav1.ConditionTrue)
	var claims quotav1alpha1.ResourceClaimList
	if err := admin.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if c.Spec.ConsumerRef == consumer {
			t.Errorf("the new organization is charged by the old one's claim %s/%s", c.Namespace, c.Name)
		}
	}
	grant()
	claim := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: rmv1alpha1.OrganizationNamespace(name)},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("units"), Amount: 5}}}}
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if c := decided(t, admin, claim); c.Status != metav1.ConditionTrue {
		t.Errorf("a claim of all 5 units of the new organization: %+v", c)
	}
	quotatest.VerifyClean(t, srv)
}

// TestARecreatedProjectInheritsNothing: the same for a project. A claim
// charged to a project, outside the project's own objects, holds its
// deletion; the name stays taken until the claim is gone, and a project
// created later under that name is charged nothing of the old one.
func TestARecreatedProjectInheritsNothing(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	org, name := uniq("org"), uniq("proj")
	if err := admin.Create(ctx, newOrganization(org)); err != nil {
		t.Fatal(err)
	}
	p := newProject(name, org)
	if err := admin.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, p, metav1.ConditionTrue)
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: name}
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-seats"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"}, Type: quotav1alpha1.RegistrationTypeAllocation,
		ResourceType: f.RT("seats"), BaseUnit: "seat", ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
	if err := admin.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "seats", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: consumer,
		Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("seats"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
	if err := admin.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	claim := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "three", Namespace: f.NS},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("seats"), Amount: 3}}}}
	if err := admin.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if c := decided(t, admin, claim); c.Status != metav1.ConditionTrue {
		t.Fatalf("the project's claim: %+v", c)
	}

	if err := admin.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &rmv1alpha1.Project{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return false, nil
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, rmv1alpha1.ConditionReady); c != nil {
			msg = c.Message
		}
		return strings.Contains(msg, "ResourceClaim "+f.NS+"/three"), nil
	})
	if err != nil {
		t.Fatalf("the deleted project does not say what is still charged to it: %q", msg)
	}
	if err := admin.Create(ctx, newProject(name, org)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating another project %s while the old one waits: want AlreadyExists, got %v", name, err)
	}
	if err := admin.Delete(ctx, claim); err != nil {
		t.Fatal(err)
	}
	waitGone(t, admin, p, time.Minute)

	again := newProject(name, org)
	if err := admin.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, again, metav1.ConditionTrue)
	five := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "five", Namespace: f.NS},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("seats"), Amount: 5}}}}
	if err := admin.Create(ctx, five); err != nil {
		t.Fatal(err)
	}
	if c := decided(t, admin, five); c.Status != metav1.ConditionTrue {
		t.Errorf("all 5 seats of the new project: %+v; it inherited the old one's", c)
	}
}
