package windows

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

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
)

// TestANewLeaderWithItsClockBehindHonoursTheRecords: a grant started and a
// trial expired under one leader; the server starts again on the same data
// with its clock an hour behind, where the started grant would not have
// begun and the trial would still run. The new leader honours both records:
// the limit is the same, nothing is counted twice, and quota fills to
// exactly that limit.
func TestANewLeaderWithItsClockBehindHonoursTheRecords(t *testing.T) {
	dir := t.TempDir()
	start := func(offset time.Duration) *testserver.Server {
		o := quotatest.FastEngineOptions()
		o.Identity = "windows-test_0_y"
		o.ClockOffset = offset
		s, err := testserver.Start(testserver.Options{DataDir: dir, Engine: &o})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start(0)
	f := quotatest.NewFixture(t, quotatest.NewClient(t, s.Config))
	f.SecretsPolicy(1)
	now := time.Now().Truncate(time.Second)
	from, until := metav1.NewTime(now.Add(8*time.Second)), metav1.NewTime(now.Add(12*time.Second))
	boost := windowedGrant(t, f, "boost", 1, &from, nil)
	trial := windowedGrant(t, f, "trial", 2, nil, &until)
	f.WaitBucket(quotatest.N(3, 0, 3), "secrets")
	for i := range 3 {
		if err := secret(f, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	waitPhase(t, f, boost, quotav1alpha1.GrantWindowActive, 30*time.Second)
	waitPhase(t, f, trial, quotav1alpha1.GrantWindowExpired, 30*time.Second)
	f.WaitBucket(quotatest.N(2, 3, 0), "secrets")
	if err := s.StopKeep(); err != nil {
		t.Fatal(err)
	}

	s = start(-time.Hour)
	defer s.Stop()
	f.C = quotatest.NewClient(t, s.Config)
	// Once the new leader decides, a create is refused against the
	// honoured limit 2 with the 3 Secrets counted once: by its own clock
	// the limit would be 3 (trial running, boost not started).
	var refusal error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		refusal = secret(f, "over")
		if refusal == nil {
			t.Fatal("after the restart with the clock behind, a create over the honoured limit was admitted")
		}
		return apierrors.IsForbidden(refusal) && strings.Contains(refusal.Error(), "Insufficient quota"), nil
	})
	if err != nil || !strings.Contains(refusal.Error(), "of the limit 2 is available (3 allocated") {
		t.Fatalf("after the restart with the clock behind: want a refusal against the limit 2 with 3 allocated, got %v", refusal)
	}
	for _, g := range []*quotav1alpha1.ResourceGrant{boost, trial} {
		got := &quotav1alpha1.ResourceGrant{}
		if err := f.C.Get(context.Background(), ctrlclient.ObjectKeyFromObject(g), got); err != nil {
			t.Fatal(err)
		}
		if want := map[string]quotav1alpha1.GrantWindowPhase{"boost": quotav1alpha1.GrantWindowActive, "trial": quotav1alpha1.GrantWindowExpired}[g.Name]; got.Status.Window == nil || got.Status.Window.Phase != want {
			t.Errorf("grant %s after the restart: window %+v, want phase %s", g.Name, got.Status.Window, want)
		}
	}
	// Usage falls to 1: exactly one more create fits the honoured limit 2.
	for i := range 2 {
		if err := f.C.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitBucket(quotatest.N(2, 1, 1), "secrets")
	if err := secret(f, "fits"); err != nil {
		t.Fatalf("a create within the honoured limit: %v", err)
	}
	if err := secret(f, "does-not"); !apierrors.IsForbidden(err) {
		t.Fatalf("a create past the honoured limit 2: want 403, got %v (the new leader counted by its own clock)", err)
	}
	f.WaitBucket(quotatest.N(2, 2, 0), "secrets")
}
