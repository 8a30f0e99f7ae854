package fence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/fence"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	testserver.Quiet()
	var err error
	if srv, err = testserver.Start(testserver.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = srv.Stop()
	os.Exit(code)
}

// TestBudgetHoldsAreFenced: a delegated grant's budget hold is a journal
// key written under the ledger's fence: once a second replica stamps the
// ledger the first can record none, and the second reads every hold the
// first recorded before (it honours them before deciding anything).
func TestBudgetHoldsAreFenced(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "budget-")
	storage := &fence.Storage{Client: etcd, Prefix: "/registry"}
	a := fence.NewReplica(kube, storage, ns, "a")
	if err := a.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.HoldBudget(ctx, ns, "before"); err != nil {
		t.Fatalf("the leader could not record a budget hold: %v", err)
	}
	b := fence.NewReplica(kube, storage, ns, "b")
	if err := b.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.HoldBudget(ctx, ns, "after"); !fence.IsDeposed(err) {
		t.Fatalf("a deposed leader recorded a budget hold (err %v); want it refused as deposed", err)
	}
	holds, err := b.BudgetHolds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(holds, ns+"/before") || slices.Contains(holds, ns+"/after") {
		t.Fatalf("the new leader reads holds %v; want %s/before and not %s/after", holds, ns, ns)
	}
}

// TestJournalIsFenced: once a second replica stamps the ledger, the first can
// record no grant and write no claim, and the second sees every grant the
// first recorded before. The claims it writes are read back through the API
// server exactly as written.
func TestJournalIsFenced(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "fence-")
	storage := &fence.Storage{Client: etcd, Prefix: "/registry"}

	a := fence.NewReplica(kube, storage, ns, "a")
	if err := a.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Grant(ctx, ns, "before"); err != nil {
		t.Fatalf("the leader could not record a grant: %v", err)
	}

	b := fence.NewReplica(kube, storage, ns, "b")
	if err := b.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Grant(ctx, ns, "after"); !fence.IsDeposed(err) {
		t.Fatalf("a deposed leader recorded a grant (err %v); want it refused as deposed", err)
	}
	claim := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before"},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/widgets", Amount: 1}},
		},
		Status: quotav1alpha1.ResourceClaimStatus{Conditions: []metav1.Condition{{
			Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ClaimReasonQuotaAvailable,
			Message: "granted", LastTransitionTime: metav1.Now(),
		}}},
	}
	if _, err := a.WriteClaim(ctx, claim); !fence.IsDeposed(err) {
		t.Fatalf("a deposed leader wrote a claim (err %v); want it refused as deposed", err)
	}

	pending, err := b.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pending, ns+"/before") || slices.Contains(pending, ns+"/after") {
		t.Fatalf("the new leader sees grants %v; want %s/before and not %s/after", pending, ns, ns)
	}

	// An operator touching the ledger without a new epoch does not depose.
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "quotaplane-decision-ledger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{"touched": "by an operator"}
	if _, err := kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if existed, err := b.WriteClaim(ctx, claim); err != nil || existed {
		t.Fatalf("the leader could not write a claim after an operator's edit: existed=%v err=%v", existed, err)
	}
	if existed, err := b.WriteClaim(ctx, claim); err != nil || !existed {
		t.Fatalf("writing a claim twice: existed=%v err=%v; want it reported as existing, not overwritten", existed, err)
	}
	if pending, _ := b.Pending(ctx); slices.Contains(pending, ns+"/before") {
		t.Fatal("the claim was written but its grant is still pending")
	}

	c := quotatest.NewClient(t, srv.Config)
	got := &quotav1alpha1.ResourceClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "before"}, got); err != nil {
		t.Fatalf("the API server cannot read the claim written to storage: %v", err)
	}
	if got.UID == "" || got.ResourceVersion == "" || got.Spec.ConsumerRef.Name != "acme" || got.Spec.Requests[0].Amount != 1 ||
		!meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
		t.Fatalf("the claim read back differs from the one written: %+v", got)
	}
	list := &quotav1alpha1.ResourceClaimList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("listing claims: %d items, err %v; want the one written", len(list.Items), err)
	}
}

// TestABatchIsOneTransaction: a committer batch holding new grants, releases
// and claims is written in one fenced transaction (every key it writes has
// the same revision); a batch in which a name is taken, or a key appears
// twice, is written as before (the taken name reported, the rest written);
// and a deposed leader writes nothing of a batch.
func TestABatchIsOneTransaction(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "batch-")
	storage := &fence.Storage{Client: etcd, Prefix: "/registry"}
	a := fence.NewReplica(kube, storage, ns, "a")
	if err := a.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"one", "two"} {
		if err := a.Grant(ctx, ns, n); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(name string) *quotav1alpha1.ResourceClaim {
		return &quotav1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.Now(), Generation: 1},
			Spec: quotav1alpha1.ResourceClaimSpec{
				ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
				Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/widgets", Amount: 1}},
			},
		}
	}
	revisions := func(keys ...string) []int64 {
		t.Helper()
		var out []int64
		for _, k := range keys {
			resp, err := etcd.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) == 0 {
				out = append(out, 0)
				continue
			}
			out = append(out, resp.Kvs[0].ModRevision)
		}
		return out
	}
	// The claim "one" replaces its grant, "two"'s grant is released, and
	// "three" and "four" are granted: one transaction.
	exists, err := a.WriteBatch(ctx, ns, []string{"three", "four"}, []string{ns + "/two"}, []*quotav1alpha1.ResourceClaim{claim("one")})
	if err != nil || len(exists) > 0 {
		t.Fatalf("a batch: exists %v, err %v", exists, err)
	}
	revs := revisions(a.ClaimKey(ns, "one"), a.PendingKey(ns, "three"), a.PendingKey(ns, "four"))
	if revs[0] == 0 || revs[0] != revs[1] || revs[1] != revs[2] {
		t.Fatalf("the keys of one batch have revisions %v: not one transaction", revs)
	}
	if pending, _ := a.Pending(ctx); !slices.Equal(slices.Sorted(slices.Values(pending)), []string{ns + "/four", ns + "/three"}) {
		t.Fatalf("pending after the batch: %v; want three and four", pending)
	}
	// A claim whose name is taken: reported, and the batch's grant still
	// written, apart.
	exists, err = a.WriteBatch(ctx, ns, []string{"five"}, nil, []*quotav1alpha1.ResourceClaim{claim("one")})
	if err != nil || exists[ns+"/one"] == nil {
		t.Fatalf("a taken name in a batch: exists %v, err %v; want %s/one reported", exists, err, ns)
	}
	if pending, _ := a.Pending(ctx); !slices.Contains(pending, ns+"/five") {
		t.Fatalf("the grant beside a taken name was not written: pending %v", pending)
	}
	// A name released and granted again in one batch: the grant finds its
	// key still there (grants go first), as before; the release is done.
	exists, err = a.WriteBatch(ctx, ns, []string{"five"}, []string{ns + "/five"}, []*quotav1alpha1.ResourceClaim{claim("six")})
	if err != nil || exists[ns+"/five"] == nil {
		t.Fatalf("a key twice in a batch: exists %v, err %v; want %s/five reported taken", exists, err, ns)
	}
	if pending, _ := a.Pending(ctx); slices.Contains(pending, ns+"/five") {
		t.Fatalf("the release beside a repeated key was not written: pending %v", pending)
	}
	// Deposed: nothing of a batch is written.
	b := fence.NewReplica(kube, storage, ns, "b")
	if err := b.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteBatch(ctx, ns, []string{"seven"}, []string{ns + "/three"}, []*quotav1alpha1.ResourceClaim{claim("eight")}); !fence.IsDeposed(err) {
		t.Fatalf("a deposed leader's batch: err %v; want deposed", err)
	}
	if revs := revisions(a.ClaimKey(ns, "eight"), a.PendingKey(ns, "seven")); revs[0] != 0 || revs[1] != 0 {
		t.Fatalf("a deposed leader's batch wrote keys at revisions %v", revs)
	}
	if pending, _ := b.Pending(ctx); !slices.Contains(pending, ns+"/three") {
		t.Fatalf("a deposed leader's batch released a grant: pending %v", pending)
	}
}

// TestFenceSurvivesTheLedgerDeleted: the ledger deleted behind the engine's
// back (straight from etcd: the API refuses it) and created again by another
// replica starts its epoch over, at the very epoch the first replica holds.
// The first replica must still be deposed: the fence checks the ledger's
// identity and holder, not only its epoch.
func TestFenceSurvivesTheLedgerDeleted(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "fence-deleted-")
	storage := &fence.Storage{Client: etcd, Prefix: "/registry"}

	a := fence.NewReplica(kube, storage, ns, "a")
	if err := a.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Grant(ctx, ns, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Delete(ctx, "/registry/configmaps/"+ns+"/"+formats.LedgerName); err != nil {
		t.Fatal(err)
	}
	b := fence.NewReplica(kube, storage, ns, "b")
	if err := b.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, formats.LedgerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["epoch"] != "1" {
		t.Fatalf("the new ledger has epoch %q; the test needs it to start over at 1", cm.Data["epoch"])
	}
	if err := a.Grant(ctx, ns, "after"); !fence.IsDeposed(err) {
		t.Fatalf("the first replica recorded a grant after the ledger was re-created at its own epoch (err %v); want deposed", err)
	}
	if err := a.Record(ctx); !fence.IsDeposed(err) {
		t.Fatalf("the first replica recorded in the re-created ledger (err %v); want deposed", err)
	}
	if err := b.Grant(ctx, ns, "by-b"); err != nil {
		t.Fatalf("the new leader could not record: %v", err)
	}
}

// TestAnEngineWithoutTheJournalRefusesServesStore: quotaplane controller
// pointed at a quotaplane serve would ignore admission's journal; it refuses
// to take the ledger over, saying why.
func TestAnEngineWithoutTheJournalRefusesServesStore(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "fence-journal-")
	serve := fence.NewReplica(kube, &fence.Storage{Client: etcd, Prefix: "/registry"}, ns, "serve")
	if err := serve.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	controller := fence.NewReplica(kube, nil, ns, "controller")
	err := controller.Stamp(ctx)
	if !errors.Is(err, fence.ErrJournalInUse) {
		t.Fatalf("an engine without the journal stamped serve's ledger (err %v); want ErrJournalInUse", err)
	}
	for _, want := range []string{"quotaplane serve", "journal", "refuses"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
	// serve itself goes on.
	if err := serve.Grant(ctx, ns, "still-leading"); err != nil {
		t.Fatalf("serve's engine after the refusal: %v", err)
	}
}

// TestJournalClaimReadsBackIdentically: a claim the journal writes straight
// to storage reads back through the API server field for field — metadata,
// owner, spec and the decided status — in the version the CRD stores.
func TestJournalClaimReadsBackIdentically(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "readback-")
	owner, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := fence.NewReplica(kube, &fence.Storage{Client: etcd, Prefix: "/registry"}, ns, "a")
	if err := r.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	written := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "written", UID: "0b8e0f0e-1111-4222-8333-444455556666", Generation: 1, CreationTimestamp: now,
			Labels:          map[string]string{"team": "a"},
			Annotations:     map[string]string{quotav1alpha1.AnnotationPolicy: "p", quotav1alpha1.AnnotationPolicyGeneration: "3", quotav1alpha1.AnnotationResource: "secrets.v1", quotav1alpha1.AnnotationResourceUID: string(owner.UID)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: "owner", UID: owner.UID}}},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/widgets", Amount: 2,
				Dimensions: []quotav1alpha1.Dimension{{Key: "region", Value: "eu"}}}},
			ResourceRef: &quotav1alpha1.ResourceRef{Kind: "Secret", Name: "owner", Namespace: ns},
		},
		Status: quotav1alpha1.ResourceClaimStatus{ObservedGeneration: 1,
			Conditions: []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ClaimReasonQuotaAvailable,
				Message: "granted", LastTransitionTime: now, ObservedGeneration: 1}},
			Allocations: []quotav1alpha1.RequestAllocation{{ResourceType: "example.com/widgets", Status: "Granted", Reason: "QuotaAvailable",
				Message: "2 granted", AllocatedAmount: 2, AllocatingBucket: "b", LastTransitionTime: now}}},
	}
	if err := r.WriteClaimAsIs(ctx, written); err != nil {
		t.Fatal(err)
	}
	got := &quotav1alpha1.ResourceClaim{}
	if err := quotatest.NewClient(t, srv.Config).Get(ctx, client.ObjectKey{Namespace: ns, Name: "written"}, got); err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != "" && got.APIVersion != quotav1alpha1.SchemeGroupVersion.String() {
		t.Errorf("read back as %s", got.APIVersion)
	}
	want := written.DeepCopy()
	want.ResourceVersion, want.ManagedFields = got.ResourceVersion, got.ManagedFields
	got.TypeMeta = metav1.TypeMeta{}
	if !equality.Semantic.DeepEqual(want.ObjectMeta, got.ObjectMeta) || !equality.Semantic.DeepEqual(want.Spec, got.Spec) || !equality.Semantic.DeepEqual(want.Status, got.Status) {
		t.Fatalf("the claim read back differs from the one written:\nwrote %+v\nread  %+v", want, got)
	}
}

// TestAnInvalidJournalWriteIsPermanent: a write etcd refuses as invalid (one
// key twice in a transaction) is classified as permanent, so the committer
// answers its requests with the error and goes on, instead of retrying it
// for the rest of the term; a valid write after it succeeds.
func TestAnInvalidJournalWriteIsPermanent(t *testing.T) {
	ctx, kube, ns, etcd := journalWorld(t, "fence-dup-")
	r := fence.NewReplica(kube, &fence.Storage{Client: etcd, Prefix: "/registry"}, ns, "a")
	if err := r.Stamp(ctx); err != nil {
		t.Fatal(err)
	}
	err, permanent := r.WriteGrantsRaw(ctx, ns, "same", "same")
	if err == nil || !permanent {
		t.Fatalf("one key twice in a transaction: err %v, permanent %v; want a permanent error", err, permanent)
	}
	if err, _ := r.WriteGrantsRaw(ctx, ns, "next"); err != nil {
		t.Fatalf("a valid write after the invalid one: %v", err)
	}
}

// journalWorld is a fresh namespace for a ledger, the admin client, and a
// client of the server's etcd (closed when the test ends).
func journalWorld(t *testing.T, prefix string) (context.Context, kubernetes.Interface, string, *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	ns := prefix + fmt.Sprint(time.Now().UnixNano())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	etcd, err := srv.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })
	return ctx, kube, ns, etcd
}
