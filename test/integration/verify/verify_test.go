package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/internal/verify"
	"github.com/quotaplane/quotaplane/internal/verify/repair"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestCleanWorld: registrations, grants, a policy on Secrets, Secrets
// created through admission, claims created directly, and one Secret
// admitted fail-open: verify finds nothing and lists the fail-open Secret
// apart. Without etcd it says what it could not read, and that Secret is
// then indistinguishable from damage.
func TestCleanWorld(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(10)
	afterPolicySecond(p)
	for i := range 3 {
		s := createSecret(t, c, f.NS, fmt.Sprintf("s%d", i))
		claimOf(t, f, string(s.UID))
	}
	// Not governed: the policy's constraint names the fixture's namespace.
	other := quotatest.NewFixture(t, c)
	createSecret(t, c, other.NS, "elsewhere")

	f.Register("projects")
	f.Grant("projects", map[string][]quotatest.Bucket{"projects": {{Amount: 5}}})
	f.WaitBucket(quotatest.N(5, 0, 5), "projects") // decided against the grant, not before it
	f.Claim("direct-1", quotatest.R("projects", 1))
	f.Claim("direct-2", quotatest.R("projects", 2))
	for _, n := range []string{"direct-1", "direct-2"} {
		if cond := f.Decided(n); cond.Status != metav1.ConditionTrue {
			t.Fatalf("claim %s: %s", n, cond.Message)
		}
	}

	// A Secret admitted without a claim, recorded fail-open as admission
	// records it: created while the policy is off, charged when it is on
	// again (existing objects are), and that claim removed behind the
	// engine's back.
	setDisabled(t, f, p, true)
	fo := createSecret(t, c, f.NS, "fail-open")
	setDisabled(t, f, p, false)
	foClaim := claimOf(t, f, string(fo.UID))
	if _, err := etcdClient(t, srv).Delete(context.Background(), fmt.Sprintf("%s/%s/resourceclaims/%s/%s", etcdPrefix, quotav1alpha1.GroupName, f.NS, foClaim.Name)); err != nil {
		t.Fatal(err)
	}
	putJSON(t, etcdClient(t, srv), formats.FailOpenKey(etcdPrefix, string(fo.UID)), formats.FailOpenRecord{
		Resource: "secrets.v1", Namespace: f.NS, Name: fo.Name, UID: string(fo.UID), Policies: []string{p.Name},
		Reason: "quota could not be decided; admitted because every matching policy is fail-open", Time: time.Now().UTC().Format(time.RFC3339),
	})

	f.WaitBucket(quotatest.N(10, 3, 7), "secrets")
	f.WaitBucket(quotatest.N(5, 3, 2), "projects")

	r := audit(t, srv, false)
	wantDiscrepancies(t, r, nil)
	if code := verify.ExitCode(r, nil); code != verify.ExitClean {
		t.Errorf("exit code %d, want %d", code, verify.ExitClean)
	}
	if len(r.FailOpen) != 1 || r.FailOpen[0].UID != string(fo.UID) || r.FailOpen[0].Unreadable != "" {
		t.Errorf("fail-open objects %+v, want only Secret %s/%s", r.FailOpen, f.NS, fo.Name)
	}
	st := policyStats(t, r, p.Name)
	if !st.Enforced || st.Governed != 4 || st.Claimed != 3 || st.FailOpen != 1 || st.Unclaimed != 0 || st.NotGoverned < 1 || st.Ambiguous != 0 {
		t.Errorf("policy %s: %+v; want 4 governed Secrets (3 claimed, 1 fail-open) and the other namespace's not governed", p.Name, st)
	}
	var text strings.Builder
	r.Print(&text)
	for _, want := range []string{"No discrepancies.", "Admitted fail-open", fo.Name} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the printed report does not say %q", want)
		}
	}

	// Without etcd: the fail-open record is not read, and verify says so.
	r = audit(t, srv, true)
	text.Reset()
	r.Print(&text)
	if r.Etcd != "" || !strings.Contains(text.String(), "fail-open records: NOT CHECKED") {
		t.Errorf("without etcd the report does not say that the journal and fail-open records were not checked")
	}
	wantDiscrepancies(t, r, []found{{verify.CheckUnclaimedObject, fo.Name}}, fo.Name)
	if len(r.Discrepancies) == 1 && !strings.Contains(r.Discrepancies[0].Problem, "fail-open records were not read") {
		t.Errorf("the discrepancy does not say that fail-open records were not read: %s", r.Discrepancies[0].Problem)
	}
}

// TestDamagedStore damages a store on purpose, each damage of another kind,
// while no engine replica decides (as fsck wants an unmounted disk), and
// checks that verify names each one and nothing else. Then verify --repair,
// started while no replica decides yet, asks the engine for each repair and
// waits; once a replica leads again every discrepancy is repaired, and a
// second run finds nothing to do.
func TestDamagedStore(t *testing.T) {
	o := quotatest.FastEngineOptions()
	s, err := testserver.Start(testserver.Options{Engine: &o})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	ctx := context.Background()
	c := quotatest.NewClient(t, s.Config)
	etcd := etcdClient(t, s)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(10)
	afterPolicySecond(p)
	waitExistingCharged(t, f, p, 30*time.Second)
	claims := map[string]*quotav1alpha1.ResourceClaim{}
	for i := range 4 {
		name := fmt.Sprintf("s%d", i)
		claims[name] = claimOf(t, f, string(createSecret(t, c, f.NS, name).UID))
	}
	f.Register("projects")
	f.Grant("projects", map[string][]quotatest.Bucket{"projects": {{Amount: 5}}})
	f.WaitBucket(quotatest.N(10, 4, 6), "secrets")
	f.WaitBucket(quotatest.N(5, 0, 5), "projects")
	wantDiscrepancies(t, audit(t, s, false), nil)

	// No engine replica decides from here on: another holder takes the Lease.
	kube := kubernetes.NewForConfigOrDie(s.Config)
	quotatest.TakeEngineLease(t, kube, o.SystemNamespace, "another-replica", 3600)
	// The engine has stopped once admission cannot decide any more (one
	// attempt each: client-go retries a 504 by itself).
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "probe"}}
		err := kube.CoreV1().RESTClient().Post().Namespace(f.NS).Resource("secrets").Param("dryRun", "All").MaxRetries(0).Body(probe).Do(ctx).Error()
		return err != nil, nil
	})
	if err != nil {
		t.Fatal("the engine still decided 30 s after losing its Lease")
	}
	time.Sleep(time.Second) // its writers finish

	// An orphan: a claim that names, by UID, a Secret that never existed.
	orphan := f.ClaimObject("orphan", quotatest.R("secrets", 1))
	orphan.Annotations = map[string]string{quotav1alpha1.AnnotationPolicy: p.Name, quotav1alpha1.AnnotationResource: "secrets.v1", quotav1alpha1.AnnotationResourceUID: string(uuid.NewUUID())}
	orphan.Spec.ResourceRef = &quotav1alpha1.ResourceRef{Kind: "Secret", Namespace: f.NS, Name: "ghost"}
	if err := c.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	// Two granted claims removed straight from etcd: their Secrets have no
	// claim, and their bucket still counts them.
	for _, n := range []string{"s1", "s2"} {
		claimKey := fmt.Sprintf("%s/%s/resourceclaims/%s/%s", etcdPrefix, quotav1alpha1.GroupName, f.NS, claims[n].Name)
		if resp, err := etcd.Delete(ctx, claimKey); err != nil || resp.Deleted != 1 {
			t.Fatalf("deleting %s from etcd: %v", claimKey, err)
		}
	}
	// A grant made at admission ten minutes ago whose claim was never
	// written, for a Secret never stored.
	staleKey := formats.AdmissionGrantsPrefix(etcdPrefix) + f.NS + "/stale"
	putStaleGrant(t, etcd, f, p, staleKey)

	secretsBucket, projectsBucket := f.BucketName("secrets"), f.BucketName("projects")
	names := []string{"/s1 ", "/s2 ", "orphan", secretsBucket, projectsBucket, f.NS + "/stale"}
	r := audit(t, s, false)
	wantDiscrepancies(t, r, []found{
		{verify.CheckBucketMismatch, projectsBucket}, // the stale grant counts: 1 allocated, 0 shown
		{verify.CheckBucketMismatch, secretsBucket},  // the removed claims: 2 allocated, 4 shown
		{verify.CheckInFlightOverdue, f.NS + "/stale"},
		{verify.CheckOrphanClaim, "orphan"},
		{verify.CheckUnclaimedObject, "/s1 "},
		{verify.CheckUnclaimedObject, "/s2 "},
	}, names...)
	if code := verify.ExitCode(r, nil); code != verify.ExitDiscrepancies {
		t.Errorf("exit code %d, want %d", code, verify.ExitDiscrepancies)
	}
	for _, d := range r.Discrepancies {
		if d.Check == verify.CheckBucketMismatch && strings.Contains(d.Problem, secretsBucket) &&
			!strings.Contains(d.Problem, "shows limit 10 and allocated 4; the stored grants and claims give limit 10 and allocated 2") {
			t.Errorf("the secrets bucket's numbers: %s", d.Problem)
		}
	}

	// verify --repair, while no replica decides: it asks, and waits. A
	// replica leads again a moment later (here the Lease is given back).
	type outcome struct {
		report  *verify.Report
		actions []repair.Action
		err     error
	}
	done := make(chan outcome, 1)
	var printed quotatest.SyncBuffer
	go func() {
		rep, actions, err := repairRun(s, &printed)
		done <- outcome{rep, actions, err}
	}()
	time.Sleep(2 * time.Second)
	if err := kube.CoordinationV1().Leases(o.SystemNamespace).Delete(ctx, "quotaplane-quota-engine", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got := <-done
	t.Logf("verify --repair printed:\n%s", printed.String())
	if got.err != nil {
		t.Fatalf("verify --repair: %v", got.err)
	}
	for _, want := range []string{"charge the existing objects of ClaimCreationPolicy " + p.Name, "deleted the orphan ResourceClaim " + f.NS + "/orphan", "asked the engine for a new term", "a new term rebuilt", "2 charged"} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("verify --repair did not print %q", want)
		}
	}
	for _, a := range got.actions {
		if a.Err != nil {
			t.Errorf("repair %q failed: %v", a.Did, a.Err)
		}
	}
	wantDiscrepancies(t, got.report, nil, names...)
	f.WaitBucket(quotatest.N(10, 4, 6), "secrets")
	f.WaitBucket(quotatest.N(5, 0, 5), "projects")
	if resp, err := etcd.Get(ctx, staleKey, clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("the stale grant is still in the journal")
	}

	// Again: nothing to repair, nothing done.
	printed = quotatest.SyncBuffer{}
	rep, actions, err := repairRun(s, &printed)
	if err != nil || len(actions) != 0 || !strings.Contains(printed.String(), "Nothing to repair.") {
		t.Fatalf("a second verify --repair: %v, actions %+v, printed %q", err, actions, printed.String())
	}
	wantDiscrepancies(t, rep, nil, names...)
}

// TestRepairWhileTheEngineRuns: damage a running engine does not notice —
// a claim removed straight from etcd, a grant written into the journal
// behind its back — stays, reading after reading, until verify --repair
// repairs it through the engine.
func TestRepairWhileTheEngineRuns(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(10)
	afterPolicySecond(p)
	waitExistingCharged(t, f, p, 30*time.Second)
	s := createSecret(t, c, f.NS, "charged")
	claim := claimOf(t, f, string(s.UID))
	f.Register("projects")
	f.Grant("projects", map[string][]quotatest.Bucket{"projects": {{Amount: 5}}})
	f.WaitBucket(quotatest.N(5, 0, 5), "projects")
	etcd := etcdClient(t, srv)
	ctx := context.Background()
	claimKey := fmt.Sprintf("%s/%s/resourceclaims/%s/%s", etcdPrefix, quotav1alpha1.GroupName, f.NS, claim.Name)
	if _, err := etcd.Delete(ctx, claimKey); err != nil {
		t.Fatal(err)
	}
	staleKey := formats.AdmissionGrantsPrefix(etcdPrefix) + f.NS + "/stale"
	putStaleGrant(t, etcd, f, p, staleKey)
	f.WaitBucket(quotatest.N(10, 0, 10), "secrets") // the engine saw the claim go

	projectsBucket := f.BucketName("projects")
	names := []string{"/charged ", projectsBucket, f.NS + "/stale"}
	want := []found{
		{verify.CheckBucketMismatch, projectsBucket},
		{verify.CheckInFlightOverdue, f.NS + "/stale"},
		{verify.CheckUnclaimedObject, "/charged "},
	}
	wantDiscrepancies(t, audit(t, srv, false), want, names...)
	time.Sleep(2 * time.Second)
	wantDiscrepancies(t, audit(t, srv, false), want, names...) // the engine repairs none of it by itself

	var printed quotatest.SyncBuffer
	rep, _, err := repairRun(srv, &printed)
	t.Logf("verify --repair printed:\n%s", printed.String())
	if err != nil {
		t.Fatal(err)
	}
	wantDiscrepancies(t, rep, nil, names...)
	claimOf(t, f, string(s.UID))
	f.WaitBucket(quotatest.N(10, 1, 9), "secrets")
	f.WaitBucket(quotatest.N(5, 0, 5), "projects")
}

// putStaleGrant writes into admission's journal a grant made ten minutes
// ago for a Secret never stored.
func putStaleGrant(t *testing.T, etcd *clientv3.Client, f *quotatest.Fixture, p *quotav1alpha1.ClaimCreationPolicy, key string) {
	t.Helper()
	putJSON(t, etcd, key, map[string]any{
		"ns": f.NS, "n": "stale", "p": p.Name, "r": "secrets.v1", "u": string(uuid.NewUUID()),
		"s": quotav1alpha1.ResourceClaimSpec{ConsumerRef: f.Org,
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: f.RT("projects"), Amount: 1}},
			ResourceRef: &quotav1alpha1.ResourceRef{Kind: "Secret", Namespace: f.NS, Name: "never-stored"}},
		"c": metav1.NewTime(time.Now().Add(-10 * time.Minute)),
	})
}

// TestLastValidVersionIsJudged: a policy whose latest edit is invalid is
// still enforced by admission in its last valid version; verify judges the
// objects by that version too, so a governed object whose claim is removed
// behind the engine's back is found.
func TestLastValidVersionIsJudged(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(10)
	afterPolicySecond(p)
	waitExistingCharged(t, f, p, 30*time.Second)
	s := createSecret(t, c, f.NS, "charged")
	claim := claimOf(t, f, string(s.UID))
	// An edit the engine judges invalid: a resource type nobody registered.
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].ResourceType = "nobody.example.com/registered"
	if err := c.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(p, quotav1alpha1.PolicyConditionReady, metav1.ConditionFalse)
	f.WaitBucket(quotatest.N(10, 1, 9), "secrets")
	if r := audit(t, srv, false); len(discrepancies(t, r)) != 0 {
		t.Fatalf("a clean plane with an invalid edit: %+v", r.Discrepancies)
	}
	// The claim removed straight from etcd: the Secret is uncharged.
	if _, err := etcdClient(t, srv).Delete(context.Background(), etcdPrefix+"/quota.miloapis.com/resourceclaims/"+claim.Namespace+"/"+claim.Name); err != nil {
		t.Fatal(err)
	}
	r := audit(t, srv, false)
	got := discrepancies(t, r, "charged")
	if !slices.Contains(got, found{verify.CheckUnclaimedObject, "charged"}) {
		t.Fatalf("the Secret governed by the last valid version, its claim removed, is not reported: %+v", got)
	}
}
