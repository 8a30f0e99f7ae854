package long

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// leakLoop is how long claims are created and deleted in a tight loop: 30
// s (about 2,000 claims and objects here, nine in ten deleted at once, many
// while their decision is in flight), a minute with QUOTAPLANE_FULL_SCALE
// set.
func leakLoop() time.Duration { return quotatest.Scale(30*time.Second, time.Minute) }

// TestClaimsDeletedInFlightLeakNothing: claims created and deleted at once,
// in a tight loop, for 30 s (a minute at full scale) — directly, and through admission (objects
// created and deleted at once). Deleted claims whose decision was never
// written must leave nothing held: at the end allocated equals what the
// stored granted claims hold, the ledger lists only grants of claims that
// exist, and a new claim is decided at once.
func TestClaimsDeletedInFlightLeakNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 30 s; skipped with -short")
	}
	quotatest.Exclusive(t)
	ctx := context.Background()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.RegisterClaimedBy([]string{"units"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	const limit = 1_000_000
	f.Grant("g", map[string][]quotatest.Bucket{"units": {{Amount: limit}}})
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", f.NS)}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind, Name: f.Org.Name},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: string(f.RT("units")), Amount: intstr.FromInt32(1)}},
	}
	if err := f.C.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)

	deadline := time.Now().Add(leakLoop())
	var claims, objects, errs atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				if w%2 == 0 {
					c := f.ClaimObject(name, quotatest.R("units", 1))
					if err := f.C.Create(ctx, c); err != nil {
						errs.Add(1)
						continue
					}
					claims.Add(1)
					if i%10 != 0 { // keep one in ten
						if err := f.C.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
							errs.Add(1)
						}
					}
					continue
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}}
				if err := f.C.Create(ctx, cm); err != nil {
					errs.Add(1)
					continue
				}
				objects.Add(1)
				if i%10 != 0 {
					if err := f.C.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
						errs.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("in %s: %d claims and %d objects created (nine in ten deleted at once), %d errors", leakLoop(), claims.Load(), objects.Load(), errs.Load())
	if errs.Load() > 0 {
		t.Errorf("%d creates or deletes failed", errs.Load())
	}

	// Quiescence: the bucket equals the stored granted claims.
	var held, stored int64
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := f.C.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		cms := &corev1.ConfigMapList{}
		if err := f.C.List(ctx, cms, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		held = 0
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
				held++
			}
		}
		// Every stored object's claim, and every direct claim, decided.
		want := int64(0)
		for _, cm := range cms.Items {
			if cm.Name != "kube-root-ca.crt" {
				want++
			}
		}
		direct := int64(0)
		for _, c := range list.Items {
			if c.Annotations[quotav1alpha1.AnnotationResourceUID] == "" {
				direct++
			}
		}
		stored = want + direct
		if held != stored || int64(len(list.Items)) != stored {
			return false, nil
		}
		b := &quotav1alpha1.AllowanceBucket{}
		if err := f.C.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: f.BucketName("units")}, b); err != nil {
			return false, nil
		}
		return b.Status.Allocated == held, nil
	})
	if err != nil {
		t.Fatalf("allocated never settled to the stored claims: %d granted of %d stored", held, stored)
	}
	t.Logf("settled: %d claims stored and granted, bucket allocated %d", stored, held)

	// The ledger holds only grants of claims that exist (flushed within 1 s).
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(quotatest.FastEngineOptions().SystemNamespace).Get(ctx, admit.LedgerName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		inflight := map[string]string{}
		_ = json.Unmarshal([]byte(cm.Data["inflight"]), &inflight)
		return len(inflight) == 0, nil
	})
	if err != nil {
		t.Fatal("the ledger still lists grants of deleted claims")
	}
	// A new claim is decided at once.
	start := time.Now()
	f.Claim("after-the-loop", quotatest.R("units", 1))
	if cond := f.Decided("after-the-loop"); cond.Status != metav1.ConditionTrue {
		t.Fatalf("a claim after the loop: %+v", cond)
	}
	// Bound 5 s, at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 28 ms here alone (3 runs).
	timed.Within(t, "a claim after the churn loop decided", time.Since(start), 5*time.Second)
}
