package review

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// reviewOf is a QuotaReview of objects.
func reviewOf(t *testing.T, objs ...client.Object) *quotav1alpha1.QuotaReview {
	t.Helper()
	r := &quotav1alpha1.QuotaReview{}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		r.Spec.Objects = append(r.Spec.Objects, runtime.RawExtension{Raw: raw})
	}
	return r
}

// TestAReviewEqualsApplyingOneByOne: 40 manifests over two projects under
// their organization's cap — two of them changes of ConfigMaps that exist,
// one growing and one shrinking, and one no policy charges. The review
// answers, taking nothing; then the manifests are applied one by one in
// order on a quiet server. Each object the review says fits is admitted,
// each it says is refused is refused with the same message, and every
// level's allocation ends where the review said.
func TestAReviewEqualsApplyingOneByOne(t *testing.T) {
	w := newWorld(t, "web", "api")
	web, api := w.projects[0], w.projects[1]
	w.grant("org", w.consumer("Organization", w.org), 40)
	w.grant("web", w.consumer("Project", web), 24)
	w.grant("api", w.consumer("Project", api), 20)
	w.ready()
	ctx := context.Background()
	w.create(w.configMap("grow", web, 2))
	w.create(w.configMap("shrink", api, 7))
	w.allocated("Organization", w.org, 9)

	var manifests []*corev1.ConfigMap
	for i := range 40 {
		project := web
		if i%3 == 2 {
			project = api
		}
		manifests = append(manifests, w.configMap(fmt.Sprintf("m%02d", i), project, 1+(i*7)%3))
	}
	manifests[6] = w.configMap("grow", web, 5)    // +3
	manifests[21] = w.configMap("shrink", api, 1) // -6: room for the ones after it
	manifests[30].Data = map[string]string{"note": "charged by no policy"}

	before := map[string]int64{"org": w.allocated("Organization", w.org, 9), "web": w.allocated("Project", web, 2), "api": w.allocated("Project", api, 7)}
	claimsBefore := len(w.claims())
	if claimsBefore != 2 {
		t.Fatalf("%d claims of the two ConfigMaps", claimsBefore)
	}
	objs := make([]client.Object, len(manifests))
	for i, m := range manifests {
		objs[i] = m
	}
	got, err := w.quota.QuotaV1alpha1().QuotaReviews().Create(ctx, reviewOf(t, objs...), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("reviewing: %v", err)
	}
	st := got.Status
	if len(st.Objects) != len(manifests) {
		t.Fatalf("%d answers for %d objects", len(st.Objects), len(manifests))
	}
	t.Logf("review: %s", st.Message)

	// It took nothing.
	if n := len(w.claims()); n != claimsBefore {
		t.Fatalf("the review left %d claims, %d before", n, claimsBefore)
	}
	w.allocated("Organization", w.org, before["org"])
	w.allocated("Project", web, before["web"])
	w.allocated("Project", api, before["api"])

	counts := map[quotav1alpha1.QuotaReviewResult]int{}
	for _, o := range st.Objects {
		counts[o.Result]++
	}
	if counts[quotav1alpha1.ReviewFits] == 0 || counts[quotav1alpha1.ReviewRefused] == 0 || counts[quotav1alpha1.ReviewNotCharged] != 1 {
		t.Fatalf("the set should have objects that fit, refused and one not charged: %v", counts)
	}
	if st.Fits || int(st.Refused) != counts[quotav1alpha1.ReviewRefused] {
		t.Fatalf("fits %v refused %d, with %v", st.Fits, st.Refused, counts)
	}
	if o := st.Objects[6]; o.Operation != "Update" || o.Result != quotav1alpha1.ReviewFits || len(o.Charges) != 1 || o.Charges[0].Amount != 5 || o.Charges[0].Held != 2 {
		t.Fatalf("the growing update: %+v", o)
	}
	if o := st.Objects[21]; o.Operation != "Update" || o.Result != quotav1alpha1.ReviewFits {
		t.Fatalf("the shrinking update: %+v", o)
	}

	// Applied one by one, in order.
	for i, m := range manifests {
		var err error
		cur := &corev1.ConfigMap{}
		exists := w.admin.Get(ctx, client.ObjectKeyFromObject(m), cur) == nil
		if exists {
			cur.Data = m.Data
			err = w.admin.Update(ctx, cur)
		} else {
			err = w.admin.Create(ctx, m.DeepCopy())
		}
		o := st.Objects[i]
		switch o.Result {
		case quotav1alpha1.ReviewFits, quotav1alpha1.ReviewNotCharged:
			if err != nil {
				t.Fatalf("objects[%d] %s: the review said %s, applying it: %v", i, m.Name, o.Result, err)
			}
		case quotav1alpha1.ReviewRefused:
			if err == nil {
				t.Fatalf("objects[%d] %s: the review refused it (%s), applying it was admitted", i, m.Name, o.Message)
			}
			if err.Error() != o.Message {
				t.Fatalf("objects[%d] %s: refused with\n  %s\nthe review said\n  %s", i, m.Name, err, o.Message)
			}
		}
		if exists && err == nil {
			w.settled(m.Name, m.Data["cpu"])
		}
	}
	for _, b := range st.Buckets {
		if b.ResourceType != w.rt {
			continue
		}
		w.allocated(b.ConsumerRef.Kind, b.ConsumerRef.Name, b.AllocatedAfter)
		if b.Allocated+b.Take != b.AllocatedAfter {
			t.Errorf("bucket %s %s: %d + %d != %d", b.ConsumerRef.Kind, b.ConsumerRef.Name, b.Allocated, b.Take, b.AllocatedAfter)
		}
	}
	if len(st.Buckets) != 3 {
		t.Fatalf("buckets %+v: want the organization and its two projects", st.Buckets)
	}
}

// settled waits until an updated ConfigMap's claim holds cpu cores: the
// update is settled, as on a quiet server before the next apply.
func (w *world) settled(name, cpu string) {
	w.t.Helper()
	w.poll("the claim of "+name+" to be replaced", func() bool {
		n := 0
		ok := false
		for _, c := range w.claims() {
			if c.Spec.ResourceRef.Name == name {
				n++
				ok = fmt.Sprint(c.Spec.Requests[0].Amount) == cpu
			}
		}
		return n == 1 && ok
	})
}
