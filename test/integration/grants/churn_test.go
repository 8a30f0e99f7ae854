package grants

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestConvergesUnderChurn: a burst of objects, each relabelled back and
// forth between two policies' tiers many times at once while one policy's
// template is edited, ends with exactly one grant per object, from the
// policy of its final tier, at the final template — never two, none left
// over — and the bucket shows exactly their sum. It measures the burst.
func TestConvergesUnderChurn(t *testing.T) {
	quotatest.Exclusive(t)
	const n, flips = 200, 6
	w := newWorld(t, "projects")
	gold := w.tierPolicy("gold", "gold", "projects", 3)
	silver := w.tierPolicy("silver", "silver", "projects", 1)
	w.waitReady(gold, metav1.ConditionTrue, policy.ReasonReady)
	w.waitReady(silver, metav1.ConditionTrue, policy.ReasonReady)

	ctx := context.Background()
	began := time.Now()
	quotatest.ForEach(t, n, func(i int) error {
		return w.C.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Namespace: w.NS, Labels: map[string]string{"tier": "gold"}}})
	})
	w.waitActive(gold.Name, n)
	t.Logf("measured: %d ConfigMaps created at once → %d Active grants in %s", n, n, time.Since(began).Round(time.Millisecond))

	// Churn: every object flips tier several times; meanwhile the gold
	// template's amount is edited.
	final := func(i int) string {
		if i%2 == 0 {
			return "gold"
		}
		return "silver"
	}
	var edit sync.WaitGroup
	edit.Go(func() {
		for a := int64(4); a <= 6; a++ {
			w.update(gold, func() { gold.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount = a })
			time.Sleep(50 * time.Millisecond)
		}
	})
	quotatest.ForEach(t, n, func(i int) error {
		cm := &corev1.ConfigMap{}
		key := client.ObjectKey{Namespace: w.NS, Name: fmt.Sprintf("cm-%03d", i)}
		tiers := []string{"silver", "gold"}
		for f := range flips {
			tier := tiers[f%2]
			if f == flips-1 {
				tier = final(i)
			}
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := w.C.Get(ctx, key, cm); err != nil {
					return err
				}
				cm.Labels["tier"] = tier
				return w.C.Update(ctx, cm)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	edit.Wait()
	churned := time.Now()

	var goldWant, silverWant []string
	for i := range n {
		name := fmt.Sprintf("%s/cm-%03d-%s", w.NS, i, final(i))
		if final(i) == "gold" {
			goldWant = append(goldWant, name)
		} else {
			silverWant = append(silverWant, name)
		}
	}
	w.waitGrants(gold.Name, goldWant...)
	w.waitGrants(silver.Name, silverWant...)
	want := int64(len(goldWant))*6 + int64(len(silverWant))*1
	w.WaitBucket(quotatest.N(want, 0, want), "projects")
	t.Logf("measured: %d objects × %d tier flips and 3 template edits → converged %s after the last write", n, flips, time.Since(churned).Round(time.Millisecond))
	for _, g := range w.grantsOf(gold.Name) {
		if a := g.Spec.Allowances[0].Buckets[0].Amount; a != 6 {
			t.Errorf("grant %s has amount %d, want the final template's 6", g.Name, a)
		}
	}
}

// waitActive waits until the policy has n grants, all Active.
func (w *world) waitActive(policy string, n int) {
	w.T.Helper()
	active := 0
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		active = 0
		for _, g := range w.grantsOf(policy) {
			if meta.IsStatusConditionTrue(g.Status.Conditions, quotav1alpha1.GrantConditionActive) {
				active++
			}
		}
		return active == n, nil
	})
	if err != nil {
		w.T.Fatalf("policy %s has %d Active grants, want %d", policy, active, n)
	}
}
