package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
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
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestPlanesSurviveKill: quotaplane serve is SIGKILLed while 32 clients
// create ConfigMaps in the control planes of two projects of one
// organization (limit 30; each project's own grant 100), charged by a
// ClaimCreationPolicy without consumerRef (each to the project whose plane
// it is created in), then started again. Afterwards every ConfigMap stored
// in a plane has one granted claim, the organization's bucket allocates
// exactly their number and each project's bucket its own, never over the
// organization's limit; creating on until refused fills it exactly.
func TestPlanesSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const limit = 30
	k := serveForKill(t)
	c := k.c
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	org, rt, projects := killOrganization(t, c, f, "kp-", "configmaps", 2, limit)
	var planeClients []client.Client
	for _, name := range projects {
		planeClients = append(planeClients, quotatest.NewClient(t, planes.ConfigFor(k.cfg, planes.Plane{Kind: planes.Projects, Name: name})))
	}
	pol := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID}}
	pol.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	pol.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.world.orValue('') == %q", f.ID)}}
	pol.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: rt, Amount: intstr.FromInt32(1)}}
	if err := c.Create(ctx, pol); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(pol, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	// Both planes serve (their projects are Ready) and the policy is in
	// force there: a probe in each is charged, and stays.
	for i, pc := range planeClients {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default", Labels: map[string]string{"world": f.ID}}}
			if err := pc.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
				return false, nil
			}
			claims := &quotav1alpha1.ResourceClaimList{}
			return pc.List(ctx, claims, client.InNamespace(planes.SystemNamespace)) == nil && len(claims.Items) == 1, nil
		})
		if err != nil {
			t.Fatalf("project %s's plane never charged a probe: %v", projects[i], err)
		}
	}

	var seq atomic.Int64
	created := killAfterSuccesses(t, k.proc, 32, 10, 15, func(r *rand.Rand) error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", r.Uint32(), seq.Add(1)), Namespace: "default",
			Labels: map[string]string{"world": f.ID}}}
		return planeClients[r.IntN(len(planeClients))].Create(rctx, cm)
	})
	t.Logf("killed after %d admitted creates", created)

	k.restart(t)
	bucketName := func(kind, name string) string {
		return quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}, ResourceType: rt})
	}
	var why string
	check := func(ctx context.Context) (bool, error) {
		total := 0
		for i, pc := range planeClients {
			cms := &corev1.ConfigMapList{}
			claims := &quotav1alpha1.ResourceClaimList{}
			if pc.List(ctx, cms, client.InNamespace("default"), client.MatchingLabels{"world": f.ID}) != nil ||
				pc.List(ctx, claims, client.InNamespace(planes.SystemNamespace)) != nil {
				why = "the planes are not readable yet"
				return false, nil
			}
			granted := 0
			for _, cl := range claims.Items {
				if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
					granted++
				}
			}
			if granted != len(cms.Items) {
				why = fmt.Sprintf("project %s: %d ConfigMaps stored in its plane, %d granted claims", projects[i], len(cms.Items), granted)
				return false, nil
			}
			pb := &quotav1alpha1.AllowanceBucket{}
			if c.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(org), Name: bucketName("Project", projects[i])}, pb) != nil || pb.Status.Allocated != int64(granted) {
				why = fmt.Sprintf("project %s's bucket allocates %d, its granted claims %d", projects[i], pb.Status.Allocated, granted)
				return false, nil
			}
			total += granted
		}
		b := &quotav1alpha1.AllowanceBucket{}
		if c.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(org), Name: bucketName("Organization", org)}, b) != nil || b.Status.Allocated != int64(total) {
			why = fmt.Sprintf("the organization's bucket allocates %d, %d claims are granted", b.Status.Allocated, total)
			return false, nil
		}
		if total > limit {
			return false, fmt.Errorf("%d claims granted against the organization's limit %d", total, limit)
		}
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, check); err != nil {
		t.Fatalf("after the restart the levels never matched the ConfigMaps stored in the planes: %s (%v)", why, err)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 2 * limit {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fill-%d", seq.Add(1)), Namespace: "default", Labels: map[string]string{"world": f.ID}}}
		err := planeClients[r.IntN(2)].Create(ctx, cm)
		if apierrors.IsForbidden(err) {
			break
		} else if err != nil && !apierrors.IsTooManyRequests(err) && !apierrors.IsServiceUnavailable(err) {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, check); err != nil {
		t.Fatalf("after filling: %s (%v)", why, err)
	}
	b := &quotav1alpha1.AllowanceBucket{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(org), Name: bucketName("Organization", org)}, b); err != nil {
		t.Fatal(err)
	}
	if b.Status.Allocated != limit {
		t.Fatalf("filled after the restart, the organization allocates %d of %d", b.Status.Allocated, limit)
	}
}
