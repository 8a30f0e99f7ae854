package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestResizesSurviveKill: quotaplane serve is SIGKILLed while 32 clients
// resize 40 ConfigMaps (data.size, charged by a policy; limit 200), then
// started again on the same data directory. Afterwards every ConfigMap's
// claims must equal what the policy computes for what is stored — one
// granted claim of exactly its size — and the bucket must allocate exactly
// their sum: an update stored whose replacement was lost, or a growth held
// for an update never stored, would show here.
func TestResizesSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const limit, objects = 200, 40
	k := serveForKill(t)
	p, c := k.proc, k.c
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	f.RegisterClaimedBy([]string{"size"}, quotav1alpha1.ClaimingResource{Kind: "ConfigMap"})
	f.Grant("g", map[string][]quotatest.Bucket{"size": {{Amount: limit}}})
	pol := f.Policy("size", "v1", "ConfigMap", "size", intstr.FromString("{{ int(trigger.data.size) }}"), func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints = append(p.Spec.Trigger.Constraints, quotav1alpha1.Constraint{Expression: `has(trigger.data) && "size" in trigger.data`})
	})
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.NS}, Data: map[string]string{"size": "1"}}
	f.WaitPolicyReady(pol, metav1.ConditionTrue, probe)
	for i := range objects {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i), Namespace: f.NS}, Data: map[string]string{"size": "1"}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}

	resized := killAfterSuccesses(t, p, 32, 100, 60, func(r *rand.Rand) error {
		name := fmt.Sprintf("cm-%02d", r.IntN(objects))
		body := fmt.Sprintf(`{"data":{"size":"%d"}}`, 1+r.IntN(10))
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return c.Patch(rctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}}, client.RawPatch(types.MergePatchType, []byte(body)))
	})
	t.Logf("killed after %d admitted resizes", resized)

	began := time.Now()
	k.restart(t)
	var sum int64
	var why string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		cms := &corev1.ConfigMapList{}
		claims := &quotav1alpha1.ResourceClaimList{}
		bucket := &quotav1alpha1.AllowanceBucket{}
		if c.List(ctx, cms, client.InNamespace(f.NS)) != nil || c.List(ctx, claims, client.InNamespace(f.NS)) != nil ||
			c.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: f.BucketName("size")}, bucket) != nil {
			why = "not readable yet"
			return false, nil
		}
		held := map[string][]int64{}
		for _, cl := range claims.Items {
			if !meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
				why = fmt.Sprintf("claim %s is not granted", cl.Name)
				return false, nil
			}
			uid := cl.Annotations[quotav1alpha1.AnnotationResourceUID]
			held[uid] = append(held[uid], cl.Spec.Requests[0].Amount)
		}
		sum = 0
		for _, cm := range cms.Items {
			if _, ok := cm.Data["size"]; !ok {
				continue
			}
			size, _ := strconv.ParseInt(cm.Data["size"], 10, 64)
			sum += size
			if h := held[string(cm.UID)]; len(h) != 1 || h[0] != size {
				why = fmt.Sprintf("ConfigMap %s has size %d and claims holding %v", cm.Name, size, h)
				return false, nil
			}
		}
		if bucket.Status.Allocated != sum {
			why = fmt.Sprintf("the bucket allocates %d, the ConfigMaps add up to %d", bucket.Status.Allocated, sum)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("after the restart the claims never matched the stored ConfigMaps: %s", why)
	}
	if sum > limit {
		t.Fatalf("the ConfigMaps add up to %d against a limit of %d", sum, limit)
	}
	t.Logf("every ConfigMap's claim equals its stored size (total %d of %d) %s after the restart began", sum, limit, time.Since(began).Round(time.Millisecond))
}

// killAfterSuccesses runs clients workers, each calling do up to perClient
// times (with its own random source), SIGKILLs p once n calls in all have
// succeeded, and waits for p to exit. It returns the successes; the test
// fails if p was never killed.
func killAfterSuccesses(t *testing.T, p *serveProcess, clients, perClient int, n int64, do func(r *rand.Rand) error) int64 {
	t.Helper()
	var ok atomic.Int64
	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for g := range clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range perClient {
				select {
				case <-killed:
					return
				default:
				}
				if do(r) == nil && ok.Add(1) == n {
					once.Do(func() {
						_ = p.cmd.Process.Kill()
						close(killed)
					})
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("only %d requests succeeded; the server was never killed", ok.Load())
	}
	<-p.exitErr
	return ok.Load()
}
