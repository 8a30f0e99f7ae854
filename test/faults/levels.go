package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// projectLabel names, on a Secret of the load, the project it is charged to.
const projectLabel = "project"

var secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")

// Levels is what the load is charged to: an organization over projects. A Secret created in NS with the label project=<p> is charged one
// unit to project p and, through it, to the organization; each level has
// its own limit, and the projects' limits add up to more than the
// organization's, so both levels refuse.
type Levels struct {
	// NS holds the Secrets and their claims.
	NS       string
	Org      string
	Projects []string
	// BucketNS holds every level's bucket (the organization's namespace).
	BucketNS string
	// Limits are each level's limit, by bucket name.
	Limits map[string]int64
	// Names are each level's name for reports ("Project p"), by bucket name.
	Names map[string]string
	// Of are the projects' bucket names, by project.
	Of map[string]string
	// OrgBucket is the organization's bucket name.
	OrgBucket string
}

// newLevels creates an organization with a project for each of
// projectLimits, grants it orgLimit and each project its limit of a
// resource type claimed by
// Secrets, and a policy charging each Secret to the project its label
// names; it returns once every replica (each of clients) enforces the
// policy and every grant is counted.
func newLevels(t *testing.T, clients []client.Client, orgLimit int64, projectLimits ...int64) *Levels {
	t.Helper()
	ctx := t.Context()
	fx := quotatest.NewFixture(t, clients[0])
	org := "lv-" + fx.ID
	rt := fx.RT("secrets")
	lv := &Levels{NS: fx.NS, Org: org, BucketNS: rmv1alpha1.OrganizationNamespace(org),
		Limits: map[string]int64{}, Names: map[string]string{}, Of: map[string]string{}}
	create := func(o client.Object) {
		t.Helper()
		if err := fx.C.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: fx.ID + "-secrets"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: rt, BaseUnit: "unit",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "Secret"}}}}
	create(reg)
	fx.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	create(&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}})
	grant := func(name string, id quota.ConsumerID, limit int64) {
		create(&quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fx.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: id.APIGroup, Kind: id.Kind, Name: id.Name},
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: rt, Buckets: []quotav1alpha1.GrantBucket{{Amount: limit}}}}}})
		b := quota.BucketName(quota.BucketID{Consumer: id, ResourceType: string(rt)})
		lv.Limits[b], lv.Names[b] = limit, id.Kind+" "+id.Name
		if id.Kind == "Project" {
			lv.Of[id.Name] = b
		} else {
			lv.OrgBucket = b
		}
	}
	grant("org", quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}, orgLimit)
	for i, projectLimit := range projectLimits {
		name := fmt.Sprintf("%s-p%d", org, i)
		create(&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}})
		grant(fmt.Sprintf("p%d", i), quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: name}, projectLimit)
		lv.Projects = append(lv.Projects, name)
	}
	p := fx.PolicyObject("secrets", "v1", "Secret", "secrets", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "{{ trigger.metadata.labels." + projectLabel + " }}"}
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: fmt.Sprintf("has(trigger.metadata.labels) && %q in trigger.metadata.labels", projectLabel)})
	})
	create(p)
	fx.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: fx.NS, Labels: map[string]string{projectLabel: lv.Projects[0]}}}
	for _, c := range clients {
		g := *fx
		g.C = c
		g.WaitPolicyInForce(secretsGVR, probe, p.Name, p.Generation)
	}
	// Every level's bucket shows its grant: nothing of the load is decided
	// without it.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for b, limit := range lv.Limits {
			got := &quotav1alpha1.AllowanceBucket{}
			if fx.C.Get(ctx, client.ObjectKey{Namespace: lv.BucketNS, Name: b}, got) != nil || got.Status.Limit != limit {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the levels' buckets never showed their grants (%v)", lv.Limits)
	}
	return lv
}

// secret is a Secret of the load charged to project.
func (lv *Levels) secret(name, project string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: lv.NS, Labels: map[string]string{projectLabel: project}}}
}

// order is the levels' bucket names, the organization's first.
func (lv *Levels) order() []string {
	out := []string{lv.OrgBucket}
	for _, p := range lv.Projects {
		out = append(out, lv.Of[p])
	}
	return out
}
