package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkQuotaReview measures a QuotaReview of 1,000 ConfigMaps over two
// projects under their organization's cap (the goal: under 1 s),
// and, in the same run, the baseline people use today: the same 1,000
// objects as server-side dry-run creates, one at a time (each against
// current usage, never against the others). Five rounds of each,
// interleaved; medians reported.
func BenchmarkQuotaReview(b *testing.B) {
	ctx := context.Background()
	c := quotatest.NewClient(b, srv.Config)
	f := quotatest.NewFixture(b, c)
	org := quotatest.Organization(b, c, "rev-"+f.ID).Name
	orgNS := rmv1alpha1.OrganizationNamespace(org)
	rt := "rev-" + f.ID + ".example.com/vcpu"
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "rev-" + f.ID}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
	must(b, c.Create(ctx, reg))
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	projects := []string{org + "-web", org + "-api"}
	for _, p := range projects {
		pr := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: p}, Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}}
		must(b, c.Create(ctx, pr))
	}
	grant := func(name string, consumer quotav1alpha1.ConsumerRef, amount int64) {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: orgNS}, Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: consumer,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
		must(b, c.Create(ctx, g))
		f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	}
	grant("org", quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}, 1500)
	for _, p := range projects {
		grant(p, quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: p}, 1000)
	}
	var namespaces []string
	for _, p := range projects {
		ns := p + "-apps"
		must(b, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
		namespaces = append(namespaces, ns)
	}
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "rev-" + f.ID}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace in [%q, %q]", namespaces[0], namespaces[1])}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "{{ trigger.data.project }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: rt, Amount: intstr.FromString("{{ trigger.data.cpu }}")}},
	}
	must(b, c.Create(ctx, p))
	cm := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i), Namespace: namespaces[i%2]},
			Data:       map[string]string{"project": projects[i%2], "cpu": fmt.Sprint(1 + i%2)}}
	}
	f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("configmaps"), cm(0), p.Name, 1)

	const n = quotav1alpha1.MaxReviewObjects
	review := &quotav1alpha1.QuotaReview{}
	for i := range n {
		raw, err := json.Marshal(cm(i))
		must(b, err)
		review.Spec.Objects = append(review.Spec.Objects, runtime.RawExtension{Raw: raw})
	}
	qc := versioned.NewForConfigOrDie(srv.Config)
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	var reviews, dryRuns []time.Duration
	var last *quotav1alpha1.QuotaReview
	b.ResetTimer()
	for range 5 {
		start := time.Now()
		got, err := qc.QuotaV1alpha1().QuotaReviews().Create(ctx, review, metav1.CreateOptions{})
		must(b, err)
		reviews = append(reviews, time.Since(start))
		last = got
		start = time.Now()
		for i := range n {
			_, err := kube.CoreV1().ConfigMaps(namespaces[i%2]).Create(ctx, cm(i), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			must(b, err)
		}
		dryRuns = append(dryRuns, time.Since(start))
	}
	b.StopTimer()
	if len(last.Status.Objects) != n {
		b.Fatalf("%d answers", len(last.Status.Objects))
	}
	// The set takes 1,500 of the organization's 1,500: 1,000 objects, half
	// of 1 core and half of 2. All fit, exactly.
	if !last.Status.Fits {
		b.Fatalf("the set should fit exactly: %s", last.Status.Message)
	}
	med := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(float64(med(reviews).Milliseconds()), "review-ms")
	b.ReportMetric(float64(med(dryRuns).Milliseconds()), "dryruns-ms")
	b.ReportMetric(float64(med(dryRuns))/float64(med(reviews)), "x-faster")
	b.Logf("1,000 objects: review median %s (runs %v); 1,000 dry-run creates one by one median %s (runs %v)", med(reviews), reviews, med(dryRuns), dryRuns)
	if med(reviews) >= time.Second {
		b.Errorf("a review of 1,000 objects took %s (median), over the 1 s goal", med(reviews))
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}
