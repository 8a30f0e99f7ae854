package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestExistingObjectsChargedAcrossKill: serve is SIGKILLed while the engine
// charges 3,000 Secrets that existed before their policy was enabled, then
// started again on the same data directory. After the restart every Secret
// holds exactly one granted claim and the bucket allocates exactly 3,000: a
// charge lost with the process would leave a Secret free, one made twice
// would count it twice.
func TestExistingObjectsChargedAcrossKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const n = 3000
	k := serveForKill(t)
	p, c := k.proc, k.c
	f := quotatest.NewFixture(t, c)
	pol := f.SecretsPolicy(n / 2)
	ctx := context.Background()
	setPolicyDisabled := func(disabled bool) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(pol), pol); err != nil {
			t.Fatal(err)
		}
		pol.Spec.Disabled = disabled
		if err := c.Update(ctx, pol); err != nil {
			t.Fatal(err)
		}
	}
	setPolicyDisabled(true)
	f.WaitPolicyNotInForce(corev1.SchemeGroupVersion.WithResource("secrets"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}, pol.Name)
	quotatest.ForEach(t, n, func(i int) error {
		return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d", i), Namespace: f.NS}})
	})
	setPolicyDisabled(false)

	// Killed once part of the charges are written as claims.
	written := 0
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := c.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		written = len(list.Items)
		return written >= n/5, nil
	})
	if err != nil {
		t.Fatalf("the engine wrote %d claims of %d existing Secrets within a minute", written, n)
	}
	_ = p.cmd.Process.Kill()
	<-p.exitErr
	t.Logf("killed with %d of %d claims written", written, n)

	began := time.Now()
	k.restart(t)
	var claims, owned int
	var allocated int64
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		secrets := &corev1.SecretList{}
		bucket := &quotav1alpha1.AllowanceBucket{}
		if c.List(ctx, list, client.InNamespace(f.NS)) != nil || c.List(ctx, secrets, client.InNamespace(f.NS)) != nil ||
			c.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: f.BucketName("secrets")}, bucket) != nil {
			return false, nil
		}
		perSecret := map[string]int{}
		for _, cl := range list.Items {
			if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) && len(cl.OwnerReferences) == 1 {
				perSecret[string(cl.OwnerReferences[0].UID)]++
			}
		}
		owned = 0
		for _, s := range secrets.Items {
			if perSecret[string(s.UID)] == 1 {
				owned++
			}
		}
		claims, allocated = len(list.Items), bucket.Status.Allocated
		return owned == n && claims == n && allocated == n, nil
	})
	if err != nil {
		t.Fatalf("after the restart: %d claims, %d Secrets with exactly one granted claim, %d allocated; want %d of each", claims, owned, allocated, n)
	}
	t.Logf("every existing Secret charged exactly once %s after the restart began", time.Since(began).Round(time.Millisecond))
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &quotav1alpha1.ClaimCreationPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(pol), cur); err != nil {
			return false, nil
		}
		st := cur.Status.ExistingObjects
		return st != nil && st.Generation == cur.Generation, nil
	})
	if err != nil {
		t.Fatal("the policy's status.existingObjects never reported the pass after the restart")
	}
}
