package bench

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkHierarchyAdmission measures admission creates/s with and without
// a hierarchy: b.N ConfigMaps created by 16 clients, each charged by a
// ClaimCreationPolicy to a Project, (a) with the project's grant as the only
// level, (b) with the registration charging the project's Organization too
// and a group grant selecting the project, each with a grant (three levels).
// The modes alternate for 5 rounds; it reports the medians and (b)/(a).
func BenchmarkHierarchyAdmission(b *testing.B) {
	quotatest.Exclusive(b)
	c := quotatest.NewClient(b, srv.Config)
	modes := []string{"a-one-level", "b-three-levels"}
	rates := map[string][]float64{}
	b.StopTimer()
	for round := range 5 {
		for k := range modes {
			m := modes[(round+k)%len(modes)]
			r := hierarchyCreatesPerSecond(b, c, m == "b-three-levels", b.N, 16)
			rates[m] = append(rates[m], r)
			b.Logf("round %d %s: %.0f creates/s", round+1, m, r)
		}
	}
	median := func(m string) float64 {
		v := append([]float64(nil), rates[m]...)
		sort.Float64s(v)
		return v[len(v)/2]
	}
	for _, m := range modes {
		b.ReportMetric(median(m), m+"-creates/s")
	}
	b.ReportMetric(median("b-three-levels")/median("a-one-level"), "three/one")
}

func hierarchyCreatesPerSecond(b *testing.B, c client.Client, levels bool, n, clients int) float64 {
	b.Helper()
	ctx := context.Background()
	f := quotatest.NewFixture(b, c)
	org, project := "h-"+f.ID, "h-"+f.ID+"-p"
	rt := string(f.RT("vcpu"))
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-vcpu"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
	if levels {
		reg.Spec.ParentConsumerTypes = []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}}
	}
	team := "quota.miloapis.com/bench-" + f.ID
	objs := []client.Object{reg,
		&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}},
		&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: project, Labels: map[string]string{team: "data"}},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}},
	}
	grant := func(name string, ref quotav1alpha1.ConsumerRef) *quotav1alpha1.ResourceGrant {
		return &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: ref,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: int64(10 * n)}}}}}}
	}
	objs = append(objs, grant("project", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}))
	if levels {
		g := grant("group", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"})
		g.Spec.ConsumerSelector = &metav1.LabelSelector{MatchLabels: map[string]string{team: "data"}}
		objs = append(objs, grant("org", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}), g)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			b.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	p := f.Policy("vcpu", "v1", "ConfigMap", "vcpu", intstr.FromInt32(1), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}
	})
	f.WaitPolicyReady(p, metav1.ConditionTrue, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.NS}})
	// Every level's grant counts before the run.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceGrantList{}
		if err := c.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		for _, g := range list.Items {
			if len(g.Status.Conditions) == 0 || g.Status.Conditions[0].Status != metav1.ConditionTrue {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatalf("grants not active: %v", err)
	}
	time.Sleep(time.Second) // let set-up writes settle
	elapsed, _ := runClients(b, n, clients, func(i int) error {
		return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i), Namespace: f.NS}})
	})
	time.Sleep(2 * time.Second) // the asynchronous writes: claims, buckets
	removeNamespace(b, c, f.NS)
	for _, o := range []client.Object{&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}}, reg} {
		_ = c.Delete(ctx, o)
	}
	return float64(n) / elapsed.Seconds()
}
