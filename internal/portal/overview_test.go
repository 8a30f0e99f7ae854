package portal

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func TestBuildOverview(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	bucket := func(org, kind, name, rt string, limit, allocated int64, fullIn time.Duration) *quotav1alpha1.AllowanceBucket {
		b := &quotav1alpha1.AllowanceBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "organization-" + org, Name: org + name + rt},
			Spec:   quotav1alpha1.AllowanceBucketSpec{ConsumerRef: quotav1alpha1.ConsumerRef{Kind: kind, Name: name}, ResourceType: quotav1alpha1.ResourceType(rt)},
			Status: quotav1alpha1.AllowanceBucketStatus{Limit: limit, Allocated: allocated, Available: max(0, limit-allocated)}}
		if fullIn > 0 {
			at := metav1.NewTime(now.Add(fullIn))
			b.Status.EstimatedFullAt, b.Status.FullIn = &at, "soon"
		}
		return b
	}
	projected := bucket("gamma", "Project", "x", "cpu", 1, 1, 0)
	projected.Labels = map[string]string{quotav1alpha1.LabelProjectedFrom: "milo-system"}
	buckets := []*quotav1alpha1.AllowanceBucket{
		bucket("alpha", "Organization", "alpha", "cpu", 10, 5, 0),
		bucket("alpha", "Project", "web", "disk", 10, 9, 0),                // alpha's worst: 90%
		bucket("beta", "Organization", "beta", "cpu", 10, 9, 48*time.Hour), // 90%, full sooner than delta
		bucket("delta", "Organization", "delta", "cpu", 10, 9, 96*time.Hour),
		bucket("epsilon", "Organization", "epsilon", "cpu", 0, 3, 0), // allocated against no limit: 100%
		projected, // a group's copy: not the organization's own
		{ObjectMeta: metav1.ObjectMeta{Namespace: "quotaplane-system", Name: "other"}}, // no consumer: skipped
	}
	// A Namespace's bucket, in the system namespace, and its copy in the
	// namespace: one row of its own, under Others.
	dev := bucket("x", "Namespace", "dev", "core/configmaps", 4, 3, 0)
	dev.Namespace = "quotaplane-system"
	devCopy := dev.DeepCopy()
	devCopy.Namespace, devCopy.Labels = "dev", map[string]string{quotav1alpha1.LabelProjectedFrom: "quotaplane-system"}
	buckets = append(buckets, dev, devCopy)
	got := BuildOverview(buckets, map[string]string{"alpha": "Standard"}, map[string]int{"beta": 2}, OverviewQuery{}, now)
	var names []string
	for _, r := range got.Organizations {
		names = append(names, r.Name)
	}
	if want := []string{"epsilon", "beta", "delta", "alpha"}; !slices.Equal(names, want) {
		t.Fatalf("order %v, want %v", names, want)
	}
	if len(got.Others) != 1 || got.Others[0].Kind != "Namespace" || got.Others[0].Name != "dev" || got.Others[0].Buckets != 1 || got.Others[0].Worst.Percent != 75 {
		t.Errorf("others: %+v; want Namespace dev, one bucket, 75%%", got.Others)
	}
	if got.Total != 4 || !slices.Equal(got.ResourceTypes, []string{"core/configmaps", "cpu", "disk"}) {
		t.Errorf("total %d types %v", got.Total, got.ResourceTypes)
	}
	alpha := got.Organizations[3]
	if alpha.Worst.ConsumerName != "web" || alpha.Worst.Percent != 90 || alpha.Buckets != 2 || alpha.Type != "Standard" {
		t.Errorf("alpha: %+v %+v", alpha, alpha.Worst)
	}
	if beta := got.Organizations[1]; beta.PendingRequests != 2 || *beta.FullInSeconds != 48*3600 {
		t.Errorf("beta: %+v", beta)
	}
	// Filters: by resource type (alpha's worst is then its cpu bucket), by name, and a row limit.
	f := BuildOverview(buckets, nil, nil, OverviewQuery{ResourceType: "cpu", Organization: "al", Limit: 1}, now)
	if len(f.Organizations) != 1 || f.Organizations[0].Name != "alpha" || f.Organizations[0].Worst.Percent != 50 {
		t.Errorf("filtered: %+v", f.Organizations)
	}
	if l := BuildOverview(buckets, nil, nil, OverviewQuery{Limit: 2}, now); len(l.Organizations) != 2 || l.Total != 4 {
		t.Errorf("limited: %d rows of %d", len(l.Organizations), l.Total)
	}
}
