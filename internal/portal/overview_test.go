package portal

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
		bucket("epsilon", "Organization", "epsilon", "cpu", 0, 3, 0), // 3 used of a limit of 0: over it, above any percent
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
	if len(got.Others) != 1 || got.Others[0].Kind != "Namespace" || got.Others[0].Name != "dev" || got.Others[0].Buckets != 1 || pct(got.Others[0].Worst) != 75 {
		t.Errorf("others: %+v; want Namespace dev, one bucket, 75%%", got.Others)
	}
	if got.Total != 4 || !slices.Equal(got.ResourceTypes, []string{"core/configmaps", "cpu", "disk"}) {
		t.Errorf("total %d types %v", got.Total, got.ResourceTypes)
	}
	alpha := got.Organizations[3]
	if alpha.Worst.ConsumerName != "web" || pct(alpha.Worst) != 90 || alpha.Buckets != 2 || alpha.Type != "Standard" {
		t.Errorf("alpha: %+v %+v", alpha, alpha.Worst)
	}
	if eps := got.Organizations[0].Worst; eps.Percent != nil || !eps.OverLimit {
		t.Errorf("epsilon, 3 used of 0: percent %v, over limit %v; want no percent, over limit", eps.Percent, eps.OverLimit)
	}
	if beta := got.Organizations[1]; beta.PendingRequests != 2 || *beta.FullInSeconds != 48*3600 {
		t.Errorf("beta: %+v", beta)
	}
	// Filters: by resource type (alpha's worst is then its cpu bucket), by name, and a row limit.
	f := BuildOverview(buckets, nil, nil, OverviewQuery{ResourceType: "cpu", Organization: "al", Limit: 1}, now)
	if len(f.Organizations) != 1 || f.Organizations[0].Name != "alpha" || pct(f.Organizations[0].Worst) != 50 {
		t.Errorf("filtered: %+v", f.Organizations)
	}
	if l := BuildOverview(buckets, nil, nil, OverviewQuery{Limit: 2}, now); len(l.Organizations) != 2 || l.Total != 4 {
		t.Errorf("limited: %d rows of %d", len(l.Organizations), l.Total)
	}
}

// pct is the bucket's percent, -1 when it has none.
func pct(w *WorstBucket) int32 {
	if w == nil || w.Percent == nil {
		return -1
	}
	return *w.Percent
}

// TestWorstBucketFullness: how full the overview says a bucket is. Used of a
// limit of 0 is over the limit and has no percent (it once read 100, as if
// exactly full); everything else is allocated of limit, rounded down.
func TestWorstBucketFullness(t *testing.T) {
	percent := func(p int32) *int32 { return &p }
	for _, tc := range []struct {
		name             string
		limit, allocated int64
		want             WorstBucket
		wantFullness     int64
	}{
		{"half", 10, 5, WorstBucket{Limit: 10, Allocated: 5, Available: 5, Percent: percent(50)}, 50},
		{"rounded down", 3, 2, WorstBucket{Limit: 3, Allocated: 2, Available: 1, Percent: percent(66)}, 66},
		{"exactly full", 10, 10, WorstBucket{Limit: 10, Allocated: 10, Percent: percent(100)}, 100},
		{"over a limit", 10, 15, WorstBucket{Limit: 10, Allocated: 15, Percent: percent(150), OverLimit: true}, 150},
		{"used of a limit of 0", 0, 2, WorstBucket{Limit: 0, Allocated: 2, OverLimit: true}, math.MaxInt64},
		{"nothing of a limit of 0", 0, 0, WorstBucket{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &quotav1alpha1.AllowanceBucket{Status: quotav1alpha1.AllowanceBucketStatus{
				Limit: tc.limit, Allocated: tc.allocated, Available: max(0, tc.limit-tc.allocated)}}
			got := worstBucket(b)
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("%d of %d (-want +got):\n%s", tc.allocated, tc.limit, diff)
			}
			if f := fullness(got); f != tc.wantFullness {
				t.Errorf("%d of %d: fullness %d, want %d", tc.allocated, tc.limit, f, tc.wantFullness)
			}
		})
	}
}
