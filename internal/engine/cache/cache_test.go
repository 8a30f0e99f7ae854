package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

var orgRef = quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "acme"}

// world is a cache with one registration and a grant of limit to acme.
func world(t *testing.T, limit int64, inflight map[string]string, trusted bool) *Cache {
	t.Helper()
	c := New(inflight, func(*quotav1alpha1.ResourceClaim) bool { return trusted })
	c.RegistrationChanged(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: "x.io/widgets", BaseUnit: "widget", Type: quotav1alpha1.RegistrationTypeEntity,
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: orgRef.APIGroup, Kind: orgRef.Kind}}})
	c.GrantChanged(&quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g"},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: orgRef,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: "x.io/widgets", Buckets: []quotav1alpha1.GrantBucket{{Amount: limit}}}}}})
	return c
}

func claim(name string, amount int64, granted bool) *quotav1alpha1.ResourceClaim {
	c := &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.Now()},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: orgRef,
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "x.io/widgets", Amount: amount}}},
	}
	if granted {
		c.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ClaimReasonQuotaAvailable}}
		c.Status.DecisionSeal = "seal"
	}
	return c
}

func allocated(c *Cache) int64 {
	var a int64
	c.Read(func(acc *accounting.Accounts) {
		st, _ := acc.Bucket(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: orgRef.APIGroup, Kind: orgRef.Kind, Name: orgRef.Name}, ResourceType: "x.io/widgets"})
		a = st.Allocated
	})
	return a
}

// TestRebuild: a claim stored Granted counts again only under a valid seal
// or when the ledger holds it; any other waits for a decision.
func TestRebuild(t *testing.T) {
	cases := map[string]struct {
		trusted       bool
		inflight      map[string]string
		stored        *quotav1alpha1.ResourceClaim
		wantAllocated int64
		wantWrite     bool
	}{
		"sealed Granted is restored":           {trusted: true, stored: claim("a", 3, true), wantAllocated: 3},
		"unsealed Granted is decided again":    {trusted: false, stored: claim("a", 3, true), wantAllocated: 0},
		"the ledger's grant is restored":       {inflight: map[string]string{"uid-a": "ns/a"}, stored: claim("a", 3, false), wantAllocated: 3, wantWrite: true},
		"a claim never decided waits":          {stored: claim("a", 3, false), wantAllocated: 0},
		"granted before seals: sealed anew":    {trusted: true, stored: func() *quotav1alpha1.ResourceClaim { c := claim("a", 3, true); c.Status.DecisionSeal = ""; return c }(), wantAllocated: 3, wantWrite: true},
		"over the limit, still restored as is": {trusted: true, stored: claim("a", 30, true), wantAllocated: 30},
	}
	// A term's first list goes through ClaimsAdded, events after it through
	// ClaimAdded: both decide the same.
	ways := map[string]func(c *Cache, cl *quotav1alpha1.ResourceClaim) bool{
		"one": (*Cache).ClaimAdded,
		"batch": func(c *Cache, cl *quotav1alpha1.ResourceClaim) bool {
			return len(c.ClaimsAdded([]*quotav1alpha1.ResourceClaim{cl})) == 1
		},
	}
	for name, tc := range cases {
		for way, add := range ways {
			t.Run(name+"/"+way, func(t *testing.T) {
				c := world(t, 10, tc.inflight, tc.trusted)
				write := add(c, tc.stored)
				if diff := cmp.Diff([]any{tc.wantAllocated, tc.wantWrite}, []any{allocated(c), write}); diff != "" {
					t.Errorf("allocated, write (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestAFirstListIsAddedAsOneByOne: many claims at once (their seals checked
// in parallel) leave the state and the writes that adding them one by one
// does, a claim listed twice included.
func TestAFirstListIsAddedAsOneByOne(t *testing.T) {
	var cls []*quotav1alpha1.ResourceClaim
	for i := range 2000 {
		cl := claim(fmt.Sprintf("c%d", i), 1, i%3 != 0)
		if i%7 == 0 {
			cl.Status.DecisionSeal = "" // granted before seals: written again
		}
		if i%5 == 0 {
			cl.Status.DecisionSeal = "forged"
		}
		cls = append(cls, cl)
	}
	cls = append(cls, cls[10])
	trusted := func(cl *quotav1alpha1.ResourceClaim) bool { return cl.Status.DecisionSeal != "forged" }
	one, batch := New(nil, trusted), New(nil, trusted)
	for _, c := range []*Cache{one, batch} {
		c.RegistrationChanged(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
			Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: "x.io/widgets", BaseUnit: "widget", Type: quotav1alpha1.RegistrationTypeEntity,
				ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: orgRef.APIGroup, Kind: orgRef.Kind}}})
	}
	var wantWrite []string
	for _, cl := range cls {
		if one.ClaimAdded(cl) {
			wantWrite = append(wantWrite, string(cl.UID))
		}
	}
	gotWrite := batch.ClaimsAdded(cls)
	if diff := cmp.Diff(wantWrite, gotWrite); diff != "" {
		t.Errorf("claims to write (-one by one +at once):\n%s", diff)
	}
	if a, b := allocated(one), allocated(batch); a != b || a == 0 {
		t.Errorf("allocated: one by one %d, at once %d; want equal and above 0", a, b)
	}
	for _, cl := range cls {
		d1, _, _, k1 := one.ClaimDecision(string(cl.UID))
		d2, _, _, k2 := batch.ClaimDecision(string(cl.UID))
		if k1 != k2 || d1.Outcome != d2.Outcome {
			t.Fatalf("claim %s: one by one %v (known %v), at once %v (known %v)", cl.Name, d1.Outcome, k1, d2.Outcome, k2)
		}
	}
}

// TestDecideRecordsGrantsInFlight: a grant decided is in flight until its
// claim is written; written, it leaves the next ledger record; at most
// MaxInflight are in flight.
func TestDecideRecordsGrantsInFlight(t *testing.T) {
	c := world(t, 10, nil, false)
	c.MarkReady()
	c.ClaimAdded(claim("a", 4, false))
	c.ClaimAdded(claim("b", 4, false))
	c.ClaimAdded(claim("c", 4, false))
	d := c.Decide(false)
	var outcomes []quota.Outcome
	for _, ch := range d.Changed {
		outcomes = append(outcomes, ch.Decision.Outcome)
	}
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.Granted, quota.QuotaExceeded}, outcomes); diff != "" {
		t.Fatalf("outcomes in creation order (-want +got):\n%s", diff)
	}
	if !d.RecordLedger {
		t.Fatal("new grants must be recorded in the ledger before they are written")
	}
	if diff := cmp.Diff(map[string]string{"uid-a": "ns/a", "uid-b": "ns/b"}, c.InflightRecord().Inflight); diff != "" {
		t.Errorf("in flight (-want +got):\n%s", diff)
	}
	c.ClaimWritten("uid-a")
	if d := c.Decide(false); d.RecordLedger {
		t.Error("a written grant alone must not force a ledger write")
	}
	if d := c.Decide(true); !d.RecordLedger {
		t.Error("a flush must record the ledger without the written grant")
	}
	if diff := cmp.Diff(map[string]string{"uid-b": "ns/b"}, c.InflightRecord().Inflight); diff != "" {
		t.Errorf("in flight after a write (-want +got):\n%s", diff)
	}
}

// TestAdoptionReplacesTheProvisionalGrant: a claim written for an admission
// grant takes its place: the quota is counted once, before and after.
func TestAdoptionReplacesTheProvisionalGrant(t *testing.T) {
	c := world(t, 10, nil, true)
	stored := claim("a", 3, true)
	stored.Annotations = map[string]string{quotav1alpha1.AnnotationResourceUID: "obj-1", quotav1alpha1.AnnotationPolicy: "p"}
	p := formats.NewPendingClaim(stored, metav1.Now())
	c.HoldPending(p)
	if got := allocated(c); got != 3 {
		t.Fatalf("a pending grant holds %d; want 3", got)
	}
	if !c.ClaimAdded(stored) {
		t.Error("an adopted claim's status must be checked")
	}
	if got := allocated(c); got != 3 {
		t.Errorf("after adoption %d allocated; want 3 (counted once)", got)
	}
	c.Lock()
	pending := c.PendingLocked(p.Key())
	c.Unlock()
	if pending != nil {
		t.Error("the pending entry stays after its claim was adopted")
	}
	c.ClaimDeleted(stored)
	if got := allocated(c); got != 0 {
		t.Errorf("after the claim's deletion %d allocated; want 0", got)
	}
}

// TestAReplacedClaimCountsUntilTheUpdateSettles: a claim an update replaces
// is deleted by its transaction before the cache learns the replacement; it
// counts until the swap, which then counts the new claim instead, once.
func TestAReplacedClaimCountsUntilTheUpdateSettles(t *testing.T) {
	c := world(t, 10, nil, true)
	old := claim("a", 3, true)
	old.Annotations = map[string]string{quotav1alpha1.AnnotationResourceUID: "obj-1", quotav1alpha1.AnnotationPolicy: "p"}
	c.ClaimAdded(old)
	c.Lock()
	held := c.ClaimsOfObjectLocked("obj-1", "p")
	c.Unlock()
	if len(held) != 1 || held[0].Ref.UID != "uid-a" {
		t.Fatalf("claims of the object: %+v", held)
	}
	p := &formats.PendingClaim{Namespace: "ns", Name: "a2", ObjectUID: "obj-1", Policy: "p", Update: true, ClaimUID: "uid-a2",
		Replaces: []formats.ReplacedClaim{held[0].Ref}, Spec: claim("a2", 5, false).Spec,
		Growth: []quotav1alpha1.ResourceRequest{{ResourceType: "x.io/widgets", Amount: 2}}}
	c.HoldPending(p)
	if got := allocated(c); got != 5 {
		t.Fatalf("old claim and growth hold %d; want 5", got)
	}
	c.ClaimDeleted(old) // the update's transaction deleted it
	if got := allocated(c); got != 5 {
		t.Fatalf("a replaced claim stopped counting before the swap: %d; want 5", got)
	}
	repl := claim("a2", 5, true)
	repl.UID = "uid-a2"
	repl.Annotations = map[string]string{quotav1alpha1.AnnotationResourceUID: "obj-1", quotav1alpha1.AnnotationPolicy: "p"}
	c.ClaimAdded(repl)
	if got := allocated(c); got != 5 {
		t.Errorf("after the swap %d allocated; want 5", got)
	}
}

// TestMarkEnded: only entries still pending as the request's own are marked.
func TestMarkEnded(t *testing.T) {
	c := world(t, 10, nil, true)
	mine := formats.NewPendingClaim(claim("a", 1, false), metav1.Now())
	c.HoldPending(mine)
	other := formats.NewPendingClaim(claim("b", 1, false), metav1.Now())
	settled := formats.NewPendingClaim(claim("b", 1, false), metav1.Now()) // same key, an earlier request's
	c.HoldPending(other)
	keys := c.MarkEnded([]*formats.PendingClaim{mine, settled}, formats.OutcomeStored, time.Now())
	if diff := cmp.Diff([]string{"ns/a"}, keys); diff != "" {
		t.Errorf("marked (-want +got):\n%s", diff)
	}
	if _, out, _, _ := c.Pending("ns/b"); out != formats.OutcomeUnknown {
		t.Errorf("another request's entry was marked %v", out)
	}
}
