package examples

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/internal/whatif"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAPodWithoutRequestsChargesNothingForThem applies examples/workloads'
// registrations, policies and quota, as its walkthrough does, and creates
// Pods: one without requests is admitted and charged its pod alone (its
// containers charge nothing, as the policy's comment says); one with a cpu
// request only, its pod and its cpu; the example's web Pod, all three.
func TestAPodWithoutRequestsChargesNothingForThem(t *testing.T) {
	testserver.Quiet()
	eo := quotatest.FastEngineOptions()
	srv, err := testserver.Start(testserver.Options{Engine: &eo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx := context.Background()
	c := quotatest.NewClient(t, srv.Config)
	dir := filepath.Join(repoRoot(t), "examples", "workloads")
	apply := func(file string) {
		t.Helper()
		objs, _, err := whatif.Read([]string{filepath.Join(dir, file)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := c.Create(ctx, o); err != nil {
				t.Fatalf("%s: creating %s %s: %v", file, o.GetKind(), o.GetName(), err)
			}
		}
	}
	poll := func(what string, ok func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
			t.Fatalf("waiting for %s", what)
		}
	}
	for _, f := range []string{"00-namespaces.yaml", "10-registrations.yaml", "20-policies.yaml", "30-quota.yaml"} {
		apply(f)
	}
	poll("the grant to be active", func() bool {
		g := &quotav1alpha1.ResourceGrant{}
		return c.Get(ctx, client.ObjectKey{Namespace: "milo-system", Name: "team-a"}, g) == nil && meta.IsStatusConditionTrue(g.Status.Conditions, quotav1alpha1.GrantConditionActive)
	})
	pod := func(name string, requests ...corev1.ResourceList) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}}
		for _, r := range requests {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c" + string(rune('0'+len(p.Spec.Containers))), Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: r}})
		}
		return p
	}
	// Admission charges Pods under the policy once this dry run says so
	// (and the namespace's service account exists).
	f := &quotatest.Fixture{T: t, C: c}
	f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("pods"), pod("in-force-probe", nil), "pods-charge-their-namespace", 1)

	if err := c.Create(ctx, pod("bare", nil, nil)); err != nil {
		t.Fatalf("a Pod of two containers without requests: %v", err)
	}
	if err := c.Create(ctx, pod("cpu-only", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")})); err != nil {
		t.Fatalf("a Pod with a cpu request only: %v", err)
	}
	apply("40-workloads.yaml")

	req := func(rt string, n int64) quotav1alpha1.ResourceRequest {
		return quotav1alpha1.ResourceRequest{ResourceType: quotav1alpha1.ResourceType(rt), Amount: n}
	}
	for name, want := range map[string][]quotav1alpha1.ResourceRequest{
		"pod-bare":     {req("core/pods", 1)},
		"pod-cpu-only": {req("core/pods", 1), req("core/requests.cpu", 100)},
		"pod-web":      {req("core/pods", 1), req("core/requests.cpu", 500), req("core/requests.memory", 256<<20)},
		"pvc-data":     {req("core/requests.storage", 10)},
	} {
		claim := &quotav1alpha1.ResourceClaim{}
		poll("claim "+name+" to be granted", func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: name}, claim) == nil &&
				meta.IsStatusConditionTrue(claim.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
		})
		if diff := cmp.Diff(want, claim.Spec.Requests); diff != "" {
			t.Errorf("claim %s requests (-want +got):\n%s", name, diff)
		}
	}
	want := map[string]int64{"core/pods": 3, "core/requests.cpu": 600, "core/requests.memory": 256 << 20, "core/requests.storage": 10}
	got := map[string]int64{}
	poll("team-a's buckets to show the three Pods and the volume", func() bool {
		l := &quotav1alpha1.AllowanceBucketList{}
		if c.List(ctx, l, client.InNamespace("quotaplane-system"), client.MatchingLabels{quotav1alpha1.LabelConsumerName: "team-a"}) != nil {
			return false
		}
		clear(got)
		for _, b := range l.Items {
			got[string(b.Spec.ResourceType)] = b.Status.Allocated
		}
		return cmp.Equal(want, got)
	})
	quotatest.VerifyClean(t, srv)
}
