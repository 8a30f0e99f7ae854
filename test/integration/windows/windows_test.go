package windows

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// windowedGrant creates a grant of amount "secrets" for the fixture's
// organization, counting from validFrom until expiresAt (nil: open).
func windowedGrant(t *testing.T, f *quotatest.Fixture, name string, amount int64, validFrom, expiresAt *metav1.Time) *quotav1alpha1.ResourceGrant {
	t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: f.Org, ValidFrom: validFrom, ExpiresAt: expiresAt,
		Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("secrets"), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
	if err := f.C.Create(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

func secret(f *quotatest.Fixture, name string) error {
	return f.C.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}})
}

// waitPhase waits until the grant's status records phase, and returns it.
func waitPhase(t *testing.T, f *quotatest.Fixture, g *quotav1alpha1.ResourceGrant, phase quotav1alpha1.GrantWindowPhase, timeout time.Duration) *quotav1alpha1.ResourceGrant {
	t.Helper()
	got := &quotav1alpha1.ResourceGrant{}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := f.C.Get(ctx, client.ObjectKeyFromObject(g), got); err != nil {
			return false, nil
		}
		return got.Status.Window != nil && got.Status.Window.Phase == phase, nil
	})
	if err != nil {
		t.Fatalf("grant %s never recorded phase %s: status %+v", g.Name, phase, got.Status)
	}
	return got
}

func waitEvent(t *testing.T, f *quotatest.Fixture, ns, name, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		evs := &corev1.EventList{}
		if err := f.C.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s Event on %s/%s", reason, ns, name)
	}
	return found
}

// TestAGrantStartingLaterCountsFromItsStart: a grant whose validFrom is
// seconds away limits nothing until then (Active=False, NotYetValid; a
// create beyond the permanent limit refused), then counts (the start
// recorded on the grant, an Event, the create admitted).
func TestAGrantStartingLaterCountsFromItsStart(t *testing.T) {
	lead := 10 * time.Second
	began := time.Now()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.SecretsPolicy(1)
	from := metav1.NewTime(time.Now().Add(lead + time.Second).Truncate(time.Second)) // at least lead away
	g := windowedGrant(t, f, "launch-week", 2, &from, nil)
	c := f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse)
	if c.Reason != quotav1alpha1.GrantReasonNotYetValid || !strings.Contains(c.Message, from.UTC().Format(time.RFC3339)) {
		t.Errorf("a grant not yet started: Active=False %s %q; want NotYetValid naming its start", c.Reason, c.Message)
	}
	waitPhase(t, f, g, quotav1alpha1.GrantWindowScheduled, 15*time.Second)
	f.WaitBucket(quotatest.N(1, 0, 1), "secrets")
	if err := secret(f, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := secret(f, "s2"); !apierrors.IsForbidden(err) {
		t.Fatalf("a create beyond the permanent limit before the grant starts: want 403, got %v", err)
	}
	// Timed: the checks before the grant's start must end before it. Bound
	// 10 s (the start's lead), at least 10 times the median measured alone;
	// docs/benchmarks.md §16 (5x the CI-load median).
	if !timed.Within(t, "a later grant's checks before its start", time.Since(began), lead) {
		t.FailNow()
	}

	started := waitPhase(t, f, g, quotav1alpha1.GrantWindowActive, 30*time.Second)
	if started.Status.Window.Since.Time.Before(from.Time) {
		t.Errorf("the start was recorded at %s, before validFrom %s", started.Status.Window.Since, from)
	}
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	f.WaitBucket(quotatest.N(3, 1, 2), "secrets")
	if err := secret(f, "s2"); err != nil {
		t.Fatalf("a create within the started grant: %v", err)
	}
	waitEvent(t, f, f.NS, g.Name, "GrantStarted")
	quotatest.VerifyClean(t, srv)

	// Nobody but the engine writes the record: a forged expiry is refused.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		forged := &quotav1alpha1.ResourceGrant{}
		if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(g), forged); err != nil {
			return err
		}
		forged.Status.Window.Phase = quotav1alpha1.GrantWindowExpired
		return f.C.Status().Update(context.Background(), forged)
	})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.expiresAt") {
		t.Fatalf("writing a grant's status.window as a user: want 403 pointing at the spec, got %v", err)
	}
}

// TestAGrantExpiringBelowUsageRevokesNothing: a trial grant expires while
// the organization uses more than its permanent limit. Nothing is revoked;
// the bucket says it is over its limit (condition and Event) and refuses
// new creates until usage falls under the limit.
func TestAGrantExpiringBelowUsageRevokesNothing(t *testing.T) {
	lead := 12 * time.Second
	began := time.Now()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.SecretsPolicy(1)
	until := metav1.NewTime(time.Now().Add(lead + time.Second).Truncate(time.Second)) // at least lead away
	g := windowedGrant(t, f, "trial", 3, nil, &until)
	c := f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	if !strings.Contains(c.Message, until.UTC().Format(time.RFC3339)) {
		t.Errorf("an expiring grant's Active message does not say until when: %q", c.Message)
	}
	f.WaitBucket(quotatest.N(4, 0, 4), "secrets")
	for i := range 4 {
		if err := secret(f, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatalf("create %d within the trial: %v", i, err)
		}
	}
	if err := secret(f, "s4"); !apierrors.IsForbidden(err) {
		t.Fatalf("a fifth create against 4: want 403, got %v", err)
	}
	// Timed: the checks above must end before the warning is due. Bound 7 s
	// (the expiry's lead less the warning's), at least 10 times the median
	// measured alone; docs/benchmarks.md §16 (5x the CI-load median).
	if !timed.Within(t, "an expiring grant's checks before its warning", time.Since(began), lead-expiryWarning) {
		t.FailNow()
	}
	// Within the warning lead time of its expiry: the grant and its bucket
	// say so, once each.
	soon := f.WaitCondition(g, quotav1alpha1.GrantConditionExpiringSoon, metav1.ConditionTrue)
	if soon.Reason != quotav1alpha1.GrantReasonExpiringSoon || !strings.Contains(soon.Message, until.UTC().Format(time.RFC3339)) {
		t.Errorf("ExpiringSoon: %s %q; want the reason ExpiringSoon and the expiry", soon.Reason, soon.Message)
	}
	bucketSoon := waitBucketCondition(t, f, quotav1alpha1.BucketConditionExpiringSoon, metav1.ConditionTrue)
	if !strings.Contains(bucketSoon.Message, f.NS+"/trial (3)") || !strings.Contains(bucketSoon.Message, "falls from 4 to 1") {
		t.Errorf("the bucket's ExpiringSoon does not name the grant and the limit after it: %q", bucketSoon.Message)
	}
	// Timed: the warning must be seen, and checked, before the expiry: from
	// when it is due to the checks' end. Bound 5 s (the warning's lead), at
	// least 10 times the median measured alone; docs/benchmarks.md §16 (5x
	// the CI-load median).
	if !timed.Within(t, "an expiring grant's warning seen after it was due", max(0, time.Since(until.Add(-expiryWarning))), expiryWarning) {
		t.FailNow()
	}

	expired := waitPhase(t, f, g, quotav1alpha1.GrantWindowExpired, 30*time.Second)
	if expired.Status.Window.Since.Time.Before(until.Time) {
		t.Errorf("the expiry was recorded at %s, before expiresAt %s", expired.Status.Window.Since, until)
	}
	c = f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionFalse)
	if c.Reason != quotav1alpha1.GrantReasonExpired {
		t.Errorf("an expired grant: Active=False reason %s, want Expired", c.Reason)
	}
	b := f.WaitBucket(quotatest.N(1, 4, 0), "secrets")
	if !meta.IsStatusConditionTrue(b.Status.Conditions, quotav1alpha1.BucketConditionOverLimit) {
		t.Errorf("a bucket allocating 4 of 1 is not OverLimit: %v", b.Status.Conditions)
	}
	waitEvent(t, f, f.BucketNS, b.Name, "LimitBelowAllocation")
	waitEvent(t, f, f.NS, g.Name, quotav1alpha1.GrantReasonExpired)
	if c := f.WaitCondition(g, quotav1alpha1.GrantConditionExpiringSoon, metav1.ConditionFalse); !strings.Contains(c.Message, "expired at") {
		t.Errorf("ExpiringSoon after the expiry: %q", c.Message)
	}
	waitBucketCondition(t, f, quotav1alpha1.BucketConditionExpiringSoon, metav1.ConditionFalse)
	for _, on := range [][2]string{{f.NS, g.Name}, {f.BucketNS, b.Name}} {
		if n := eventCount(t, f, on[0], on[1], "ExpiringSoon", "GrantsExpiringSoon"); n != 1 {
			t.Errorf("%s/%s was warned of the expiry %d times, want once", on[0], on[1], n)
		}
	}
	// Nothing revoked: every Secret keeps its granted claim.
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := f.C.List(context.Background(), claims, client.InNamespace(f.NS)); err != nil {
		t.Fatal(err)
	}
	granted := 0
	for _, cl := range claims.Items {
		if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
			granted++
		}
	}
	if granted != 4 {
		t.Fatalf("after the expiry %d claims are granted, want the 4 made during the trial", granted)
	}
	if err := secret(f, "over"); !apierrors.IsForbidden(err) {
		t.Fatalf("a create over the limit after the expiry: want 403, got %v", err)
	}

	// Usage falls: under the limit again, then room again.
	for i := range 3 {
		if err := f.C.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	b = f.WaitBucket(quotatest.N(1, 1, 0), "secrets")
	if meta.IsStatusConditionTrue(b.Status.Conditions, quotav1alpha1.BucketConditionOverLimit) {
		t.Errorf("a bucket back at its limit is still OverLimit")
	}
	if err := secret(f, "over"); !apierrors.IsForbidden(err) {
		t.Fatalf("a create at the limit: want 403, got %v", err)
	}
	if err := f.C.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: f.NS}}); err != nil {
		t.Fatal(err)
	}
	f.WaitBucket(quotatest.N(1, 0, 1), "secrets")
	if err := secret(f, "after"); err != nil {
		t.Fatalf("a create once usage fell under the limit: %v", err)
	}
	// quotaplane verify reads windowed grants as the engine does.
	quotatest.VerifyClean(t, srv)
}

// TestAWindowEndingBeforeItStartsIsRefused: bad input names the field and
// says what to do.
func TestAWindowEndingBeforeItStartsIsRefused(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	from, until := metav1.NewTime(time.Now().Add(time.Hour)), metav1.NewTime(time.Now())
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "backwards", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: f.Org, ValidFrom: &from, ExpiresAt: &until,
		Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("secrets"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 1}}}}}}
	err := f.C.Create(context.Background(), g)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.expiresAt") || !strings.Contains(err.Error(), "later than spec.validFrom") {
		t.Fatalf("a window ending before it starts: want 422 on spec.expiresAt, got %v", err)
	}
}

func waitBucketCondition(t *testing.T, f *quotatest.Fixture, condType string, status metav1.ConditionStatus) metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		b := &quotav1alpha1.AllowanceBucket{}
		if err := f.C.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: f.BucketName("secrets")}, b); err != nil {
			return false, nil
		}
		c = meta.FindStatusCondition(b.Status.Conditions, condType)
		return c != nil && c.Status == status, nil
	})
	if err != nil {
		t.Fatalf("the bucket's %s never became %s (last %+v)", condType, status, c)
	}
	return *c
}

// eventCount counts the Events of the given reasons on ns/name, repeats of
// one Event included.
func eventCount(t *testing.T, f *quotatest.Fixture, ns, name string, reasons ...string) int {
	t.Helper()
	evs := &corev1.EventList{}
	if err := f.C.List(context.Background(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		for _, r := range reasons {
			if e.InvolvedObject.Name == name && e.Reason == r {
				n += int(max(e.Count, 1))
			}
		}
	}
	return n
}

// TestAGrantNeverCountsPastItsEnd: from the moment a grant's window ends,
// no create is decided against it, however long until the engine's next
// round (it rounds once a second when idle): creates sent back to back from
// the window's end are all refused against the permanent limit. A new grant
// whose window has ended already is refused on spec.expiresAt.
func TestAGrantNeverCountsPastItsEnd(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.SecretsPolicy(1)
	// A window long enough to be used before it ends: 6 s, longer on a
	// loaded machine (a grant whose window ended first is deleted, and the
	// next try waits for the bucket to drop it).
	var until metav1.Time
	for i, window := range []time.Duration{6 * time.Second, 20 * time.Second, time.Minute} {
		until = metav1.NewTime(time.Now().Add(window).Truncate(time.Second))
		g := windowedGrant(t, f, fmt.Sprintf("short-%d", i), 20, nil, &until)
		f.WaitBucket(quotatest.N(21, 0, 21), "secrets")
		if err := secret(f, fmt.Sprintf("within-%d", i)); err != nil {
			t.Fatalf("a create within the window: %v", err)
		}
		if time.Now().Before(until.Time) {
			break
		}
		if i == 2 {
			t.Fatal("a window of a minute ended before the test could use it")
		}
		if err := f.C.Delete(context.Background(), g); err != nil {
			t.Fatal(err)
		}
		if err := f.C.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("within-%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
		f.WaitBucket(quotatest.N(1, 0, 1), "secrets")
	}
	time.Sleep(time.Until(until.Time))
	admitted, tried := []string{}, 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && tried < 200; tried++ {
		name := fmt.Sprintf("after-%d", tried)
		err := secret(f, name)
		switch {
		case err == nil:
			admitted = append(admitted, fmt.Sprintf("%s at %s", name, time.Now().Format("15:04:05.000")))
		case !apierrors.IsForbidden(err):
			t.Fatalf("a create after the window's end: want 403 against the permanent limit, got %v", err)
		}
	}
	if len(admitted) > 0 {
		t.Fatalf("%d of %d creates after the window's end (%s) were admitted against the expired grant: %v",
			len(admitted), tried, until.UTC().Format(time.RFC3339), admitted)
	}
	if tried < 3 {
		t.Fatalf("only %d creates were tried in the 3 s after the window's end; the test proves nothing", tried)
	}
	f.WaitBucket(quotatest.N(1, 1, 0), "secrets")

	past := metav1.NewTime(time.Now().Truncate(time.Second))
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "ended", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: f.Org, ExpiresAt: &past,
		Allowances: []quotav1alpha1.Allowance{{ResourceType: f.RT("secrets"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
	err := f.C.Create(context.Background(), g)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.expiresAt") || !strings.Contains(err.Error(), "would never count") {
		t.Fatalf("a grant whose window ended before its creation: want 422 on spec.expiresAt, got %v", err)
	}
}
