package verify

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
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// waitExistingCharged waits until the policy's status says its existing
// objects were charged for its current generation, and returns what it says.
func waitExistingCharged(t *testing.T, f *quotatest.Fixture, p *quotav1alpha1.ClaimCreationPolicy, timeout time.Duration) *quotav1alpha1.ExistingObjectsStatus {
	t.Helper()
	var st *quotav1alpha1.ExistingObjectsStatus
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		cur := &quotav1alpha1.ClaimCreationPolicy{}
		if err := f.C.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return false, nil
		}
		st = cur.Status.ExistingObjects
		return st != nil && st.Generation == cur.Generation && st.Request == cur.Annotations[quotav1alpha1.AnnotationChargeExisting], nil
	})
	if err != nil {
		t.Fatalf("ClaimCreationPolicy %s: status.existingObjects is %+v, not done for its generation", p.Name, st)
	}
	return st
}

// TestExistingObjectsAreCharged: five Secrets created while the policy was
// disabled are charged the moment it is enabled — beyond the limit of 2 —
// as Kubernetes' ResourceQuota counts what exists when it is created. The
// bucket shows it is over, new creates are refused until usage falls, the
// policy's status and an Event say what was charged, and verify is clean.
func TestExistingObjectsAreCharged(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(2)
	afterPolicySecond(p)
	setDisabled(t, f, p, true)
	var secrets []*corev1.Secret
	for i := range 5 {
		secrets = append(secrets, createSecret(t, c, f.NS, fmt.Sprintf("before-%d", i)))
	}
	// Enabled: the dry-run probe setDisabled waits with would be refused
	// (the bucket is over), so wait for the status instead.
	edit(t, f, p, func(p *quotav1alpha1.ClaimCreationPolicy) { p.Spec.Disabled = false })

	st := waitExistingCharged(t, f, p, 30*time.Second)
	if st.Charged != 5 || st.OverLimit != 3 || st.NotCharged != 0 {
		t.Errorf("status.existingObjects %+v: want 5 charged, 3 of them over the limit", st)
	}
	for _, s := range secrets {
		claimOf(t, f, string(s.UID))
	}
	f.WaitBucket(quotatest.N(2, 5, 0), "secrets")

	err := c.Create(context.Background(), &corev1.Secret{ObjectMeta: metavOf(f.NS, "after")})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Insufficient quota resources available") {
		t.Fatalf("a create while the bucket is over its limit: want 403 Insufficient quota resources available, got %v", err)
	}
	waitEvent(t, f, p.Name, "ExistingObjectsOverLimit", "5 charged")
	wantDiscrepancies(t, audit(t, srv, false), nil)

	// Usage falls below the limit: creates are admitted again.
	for _, s := range secrets[:4] {
		if err := c.Delete(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitBucket(quotatest.N(2, 1, 1), "secrets")
	createSecret(t, c, f.NS, "after")
	f.WaitBucket(quotatest.N(2, 2, 0), "secrets")

	// Enabling again charges nothing twice.
	setDisabled(t, f, p, true)
	edit(t, f, p, func(p *quotav1alpha1.ClaimCreationPolicy) { p.Spec.Disabled = false })
	if st := waitExistingCharged(t, f, p, 30*time.Second); st.Charged != 0 || st.Objects < 2 {
		t.Errorf("a second enable: status.existingObjects %+v, want nothing charged", st)
	}
	f.WaitBucket(quotatest.N(2, 2, 0), "secrets")
	wantDiscrepancies(t, audit(t, srv, false), nil)
}

// TestWideningATriggerChargesWhatItNowMatches: an edit that makes the
// policy's constraint match Secrets it did not charges those that exist.
func TestWideningATriggerChargesWhatItNowMatches(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(10)
	narrow := fmt.Sprintf("trigger.metadata.namespace == %q && !has(trigger.metadata.labels)", f.NS)
	edit(t, f, p, func(p *quotav1alpha1.ClaimCreationPolicy) { p.Spec.Trigger.Constraints[0].Expression = narrow })
	waitExistingCharged(t, f, p, 30*time.Second)
	plain := createSecret(t, c, f.NS, "plain")
	labelled := &corev1.Secret{ObjectMeta: metavOf(f.NS, "labelled")}
	labelled.Labels = map[string]string{"tier": "free"}
	if err := c.Create(context.Background(), labelled); err != nil {
		t.Fatal(err)
	}
	claimOf(t, f, string(plain.UID))
	f.WaitBucket(quotatest.N(10, 1, 9), "secrets")

	edit(t, f, p, func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Constraints[0].Expression = fmt.Sprintf("trigger.metadata.namespace == %q", f.NS)
	})
	if st := waitExistingCharged(t, f, p, 30*time.Second); st.Charged != 1 || st.OverLimit != 0 {
		t.Errorf("widened: status.existingObjects %+v, want the labelled Secret charged", st)
	}
	claimOf(t, f, string(labelled.UID))
	f.WaitBucket(quotatest.N(10, 2, 8), "secrets")
}

// edit changes a policy and waits until the engine judged the edit valid.
func edit(t *testing.T, f *quotatest.Fixture, p *quotav1alpha1.ClaimCreationPolicy, change func(*quotav1alpha1.ClaimCreationPolicy)) {
	t.Helper()
	if err := f.C.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	change(p)
	if err := f.C.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur := &quotav1alpha1.ClaimCreationPolicy{}
		if err := f.C.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			return false, nil
		}
		return cur.Status.Enforced != nil && cur.Status.Enforced.Generation == cur.Generation, nil
	})
	if err != nil {
		t.Fatalf("the edit of ClaimCreationPolicy %s is not enforced", p.Name)
	}
}

// waitEvent waits for an Event on a policy with that reason whose message
// contains text.
func waitEvent(t *testing.T, f *quotatest.Fixture, policy, reason, text string) {
	t.Helper()
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &corev1.EventList{}
		if err := f.C.List(ctx, list); err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range list.Items {
			if e.InvolvedObject.Kind != "ClaimCreationPolicy" || e.InvolvedObject.Name != policy {
				continue
			}
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason == reason && strings.Contains(e.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Event %s saying %q on ClaimCreationPolicy %s; seen: %v", reason, text, policy, seen)
	}
}

func metavOf(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// TestTenThousandExistingObjects: enabling a policy over 10,000 existing
// Secrets charges every one of them — claims written, bucket counting them —
// and verify finds nothing. The speed goal (under 30 s) is measured and
// logged here and stated in docs/benchmarks.md §11; the test waits up to
// chargedWait for the charging to end (a correctness timeout) and bounds its
// time with timed.Within, so that noise never fails the suite.
func TestTenThousandExistingObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 Secrets (about a minute); run without -short")
	}
	const n = 10000
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(n / 2)
	setDisabled(t, f, p, true)
	began := time.Now()
	quotatest.ForEach(t, n, func(i int) error {
		return c.Create(context.Background(), &corev1.Secret{ObjectMeta: metavOf(f.NS, fmt.Sprintf("s-%05d", i))})
	})
	t.Logf("created %d Secrets in %s", n, time.Since(began).Round(time.Millisecond))
	// The setup above is not measured and may share the machine; the
	// charging below is, against a timing goal: not beside the soaks.
	quotatest.Exclusive(t)

	began = time.Now()
	edit(t, f, p, func(p *quotav1alpha1.ClaimCreationPolicy) { p.Spec.Disabled = false })
	// A correctness timeout for each wait, above the timed bound below.
	const chargedWait = 5 * time.Minute
	st := waitExistingCharged(t, f, p, chargedWait)
	recorded := time.Since(began)
	f.WaitBucket(quotatest.N(n/2, n, 0), "secrets")
	charged := time.Since(began)
	var claims int
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, chargedWait, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := f.C.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			return false, nil
		}
		claims = 0
		for i := range list.Items {
			if isGranted(&list.Items[i]) {
				claims++
			}
		}
		return claims == n, nil
	})
	written := time.Since(began)
	t.Logf("enabled over %d Secrets: status after %s, bucket at %d after %s, every claim written and granted after %s",
		n, recorded.Round(time.Millisecond), n, charged.Round(time.Millisecond), written.Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%d of %d claims written and granted", claims, n)
	}
	// The goal, under 30 s, is measured by this test alone
	// (docs/benchmarks.md §11). Bound 3 min, at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 14.2 s here alone (3 runs: 14.2, 16.2, 13.7 s), and 30.5 s
	// once beside the e2e and soak packages.
	timed.Within(t, "10,000 existing Secrets charged: policy enabled → every claim written and granted", written, 3*time.Minute)
	if st.Charged != n || st.OverLimit != n/2 {
		t.Errorf("status.existingObjects %+v: want %d charged, %d over the limit", st, n, n/2)
	}
	wantDiscrepancies(t, audit(t, srv, false), nil)
}

// TestAPolicyCreatedLaterChargesWhatExists: Secrets created before their
// policy existed are charged once it does, and verify then judges them too.
func TestAPolicyCreatedLaterChargesWhatExists(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	for i := range 3 {
		createSecret(t, c, f.NS, fmt.Sprintf("older-%d", i))
	}
	p := f.SecretsPolicy(10)
	if st := waitExistingCharged(t, f, p, 30*time.Second); st.Charged != 3 || st.OverLimit != 0 {
		t.Errorf("status.existingObjects %+v, want the 3 older Secrets charged", st)
	}
	f.WaitBucket(quotatest.N(10, 3, 7), "secrets")
	r := audit(t, srv, false)
	wantDiscrepancies(t, r, nil)
	if st := policyStats(t, r, p.Name); st.BeforePolicy != 0 || st.Claimed != 3 {
		t.Errorf("verify's view of policy %s: %+v; want the 3 older Secrets judged and claimed", p.Name, st)
	}
}
