package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// TestGrantExpirySurvivesKill: serve is SIGKILLed the moment a trial
// grant's expiry is recorded (in the ledger, perhaps not yet on the grant),
// with usage above the limit left after it, and started again with its
// clock an hour behind, where the trial would still run. The new leader
// honours the recorded expiry: the limit stays the permanent one, the
// Secrets are counted once, and quota fills to exactly the limit. The
// shipped binary runs the trial; the restart is the same sources built with
// the test hooks (quotatest.BuildHookedBinary), the only build with
// --grant-clock-offset.
func TestGrantExpirySurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	hooked := quotatest.BuildHookedBinary(t) // before the trial starts: its build takes a while
	k := serveForKill(t)
	ctx := context.Background()
	f := quotatest.NewFixture(t, k.c)
	f.SecretsPolicy(1)
	lead := 12 * time.Second
	began := time.Now()
	until := metav1.NewTime(began.Add(lead + time.Second).Truncate(time.Second)) // at least lead away
	trial := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "trial", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: f.Org, ExpiresAt: &until,
		Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("secrets"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 2}}}}}}
	if err := k.c.Create(ctx, trial); err != nil {
		t.Fatal(err)
	}
	f.WaitBucket(quotatest.N(3, 0, 3), "secrets")
	for i := range 3 {
		if err := k.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			timed.Within(t, "a trial's creates before its expiry", time.Since(began), lead) // says so if the trial ran out first
			t.Fatalf("create %d within the trial: %v", i, err)
		}
	}
	// Timed: the trial's creates must end before it expires. Bound 12 s (the
	// trial's lead), at least 10 times the median measured alone;
	// docs/benchmarks.md §16 (5x the CI-load median).
	if !timed.Within(t, "a trial's creates before its expiry", time.Since(began), lead) {
		t.FailNow()
	}

	// Kill at the first sign of the expiry: its ledger record, or the grant's status.
	ledgerKey := client.ObjectKey{Namespace: engine.DefaultOptions().SystemNamespace, Name: formats.LedgerName}
	var seen string
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 40*time.Second, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if k.c.Get(ctx, ledgerKey, cm) == nil && strings.Contains(cm.Data[formats.LedgerWindowsKey], string(trial.UID)) {
			seen = "in the ledger"
			return true, nil
		}
		g := &quotav1alpha1.ResourceGrant{}
		if k.c.Get(ctx, client.ObjectKeyFromObject(trial), g) == nil && g.Status.Window != nil && g.Status.Window.Phase == quotav1alpha1.GrantWindowExpired {
			seen = "on the grant"
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("the trial's expiry was never recorded")
	}
	_ = k.proc.cmd.Process.Kill()
	<-k.proc.exitErr
	t.Logf("SIGKILLed with the expiry first seen %s", seen)

	k.bin = hooked
	k.restart(t, "--grant-clock-offset=-1h")
	var refusal error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		refusal = k.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "over", Namespace: f.NS}})
		if refusal == nil {
			t.Fatal("after the restart with the clock behind, a fourth Secret was admitted: the expired trial counted again")
		}
		return apierrors.IsForbidden(refusal) && strings.Contains(refusal.Error(), "Insufficient quota"), nil
	})
	if err != nil || !strings.Contains(refusal.Error(), "of the limit 1 is available (3 allocated") {
		t.Fatalf("after the restart: want a refusal against the limit 1 with 3 allocated, got %v", refusal)
	}
	g := &quotav1alpha1.ResourceGrant{}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return k.c.Get(ctx, client.ObjectKeyFromObject(trial), g) == nil && g.Status.Window != nil && g.Status.Window.Phase == quotav1alpha1.GrantWindowExpired, nil
	})
	if err != nil {
		t.Fatalf("the new leader never showed the recorded expiry on the grant: %+v", g.Status.Window)
	}
	// Exact after: down to 0 used, exactly one Secret fits the limit 1.
	for i := range 3 {
		if err := k.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitBucket(quotatest.N(1, 0, 1), "secrets")
	if err := k.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fits", Namespace: f.NS}}); err != nil {
		t.Fatalf("one Secret within the limit 1: %v", err)
	}
	if err := k.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "does-not", Namespace: f.NS}}); !apierrors.IsForbidden(err) {
		t.Fatalf("a second Secret against the limit 1: want 403, got %v", err)
	}
}
