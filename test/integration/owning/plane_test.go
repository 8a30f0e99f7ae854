package owning

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// A service claiming for a project through the project's control plane
// (the library's calls against the plane's URL, claims in its milo-system)
// is capped by the organization like every other charge: 5 owners in the
// plane asking one CPU each, the project allowed 10 and its organization 3:
// exactly 3 granted, 2 denied naming the organization; the claims are kept
// at the root in the project's quota namespace.
func TestClaimsThroughAProjectsPlaneCountUnderItsOrganization(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	org := quotatest.Organization(t, admin, "plane-"+f.ID).Name
	p := quotatest.Project(t, admin, org+"-web", org)
	rt := quotav1alpha1.ResourceType(f.ID + ".example.com/cpus")
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-cpus"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: rt, BaseUnit: "cpu",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
	if err := admin.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	for _, g := range []struct {
		kind, name string
		amount     int64
	}{{"Organization", org, 3}, {"Project", p.Name, 10}} {
		grant := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "g-" + g.name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: g.kind, Name: g.name},
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: rt, Buckets: []quotav1alpha1.GrantBucket{{Amount: g.amount}}}}}}
		if err := admin.Create(ctx, grant); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition(grant, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	}

	plane := planes.ConfigFor(srv.Config, planes.Plane{Kind: planes.Projects, Name: p.Name})
	me, err := quotaclaim.WhoAmI(ctx, srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := &quotaclaim.Claimer{Client: versioned.NewForConfigOrDie(plane), Namespace: planes.SystemNamespace, Service: "compute", Identity: me}
	kube := kubernetes.NewForConfigOrDie(plane)
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: p.Name}
	var owners []quotaclaim.Owner
	for i := range 5 {
		cm, err := kube.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owner := quotaclaim.OwnerOf(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		owners = append(owners, owner)
		if _, err := c.Ensure(ctx, owner, consumer, []quotav1alpha1.ResourceRequest{{ResourceType: rt, Amount: 1}}); err != nil {
			t.Fatalf("Ensure through the plane: %v", err)
		}
	}
	s := &service{t: t, f: f, claimer: c}
	granted, denied := 0, 0
	for _, owner := range owners {
		st := s.decidedAny(owner)
		switch st.Phase {
		case quotaclaim.Granted:
			granted++
		case quotaclaim.Denied:
			denied++
			if !containsAll(st.Message, "Organization", org) {
				t.Errorf("a denial does not name the organization's limit: %s", st.Message)
			}
		}
	}
	if granted != 3 || denied != 2 {
		t.Fatalf("%d granted and %d denied, want 3 and 2 (the organization's cap)", granted, denied)
	}
	root, err := versioned.NewForConfigOrDie(srv.Config).QuotaV1alpha1().ResourceClaims("project-"+p.Name).List(ctx, metav1.ListOptions{LabelSelector: quotav1alpha1.LabelManagedBy + "=compute"})
	if err != nil {
		t.Fatal(err)
	}
	if len(root.Items) != 5 {
		t.Fatalf("%d of the plane's claims at the root in project-%s, want 5", len(root.Items), p.Name)
	}
}
