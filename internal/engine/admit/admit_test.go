package admit

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/cache"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

var orgRef = quotav1alpha1.ConsumerRef{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "acme"}

func newTerm(limit int64, storedClaims ...string) *Term {
	c := cache.New(nil, func(*quotav1alpha1.ResourceClaim) bool { return true })
	c.RegistrationChanged(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "widgets"},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ResourceType: "x.io/widgets", BaseUnit: "widget", Type: quotav1alpha1.RegistrationTypeEntity,
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: orgRef.APIGroup, Kind: orgRef.Kind}}})
	c.GrantChanged(&quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g"},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: orgRef,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: "x.io/widgets", Buckets: []quotav1alpha1.GrantBucket{{Amount: limit}}}}}})
	stored := map[string]bool{}
	for _, k := range storedClaims {
		stored[k] = true
	}
	c.SetClaimLookup(func(k string) bool { return stored[k] })
	return &Term{Cache: c}
}

func rendered(name, policy string, amount int64) *quotav1alpha1.ResourceClaim {
	return &quotav1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Annotations: map[string]string{quotav1alpha1.AnnotationPolicy: policy, quotav1alpha1.AnnotationResourceUID: "obj-1"}},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: orgRef,
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "x.io/widgets", Amount: amount}}},
	}
}

func allocated(t *Term) int64 {
	var a int64
	t.Cache.Read(func(acc *accounting.Accounts) {
		st, _ := acc.Bucket(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: orgRef.APIGroup, Kind: orgRef.Kind, Name: orgRef.Name}, ResourceType: "x.io/widgets"})
		a = st.Allocated
	})
	return a
}

// TestDecideCreate: a create's claims are decided together, all or
// nothing; a claim name already used refuses the create and holds nothing.
func TestDecideCreate(t *testing.T) {
	cases := map[string]struct {
		limit         int64
		stored        []string
		pending       bool
		claims        []*quotav1alpha1.ResourceClaim
		wantGranted   bool
		wantTakenBy   string
		wantAllocated int64
		wantPending   int
	}{
		"fits: held as pending": {limit: 10, claims: []*quotav1alpha1.ResourceClaim{rendered("a", "p", 4), rendered("b", "q", 4)},
			wantGranted: true, wantAllocated: 8, wantPending: 2},
		"one does not fit: neither is held": {limit: 10, claims: []*quotav1alpha1.ResourceClaim{rendered("a", "p", 4), rendered("b", "q", 7)}},
		"a stored claim has the name": {limit: 10, stored: []string{"ns/a"}, claims: []*quotav1alpha1.ResourceClaim{rendered("a", "p", 1)},
			wantTakenBy: "a stored ResourceClaim"},
		"two policies render one name": {limit: 10, claims: []*quotav1alpha1.ResourceClaim{rendered("a", "p", 1), rendered("a", "q", 1)},
			wantTakenBy: "the claim ClaimCreationPolicy p renders for the same create"},
		"another create holds the name": {limit: 10, pending: true, claims: []*quotav1alpha1.ResourceClaim{rendered("a", "p", 1)},
			wantTakenBy: "a claim being admitted for another create", wantAllocated: 1, wantPending: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			term := newTerm(tc.limit, tc.stored...)
			if tc.pending {
				term.Cache.Lock()
				if _, _, err := term.decideCreateLocked([]*quotav1alpha1.ResourceClaim{rendered("a", "other", 1)}, metav1.Now()); err != nil {
					t.Fatal(err)
				}
				term.Cache.Unlock()
			}
			term.Cache.Lock()
			_, res, err := term.decideCreateLocked(tc.claims, metav1.Now())
			pending := term.Cache.PendingCountLocked()
			term.Cache.Unlock()
			var taken *route.NameTakenError
			switch {
			case tc.wantTakenBy != "":
				if !errors.As(err, &taken) || taken.By != tc.wantTakenBy {
					t.Fatalf("err %v; want the name taken by %q", err, tc.wantTakenBy)
				}
			case err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tc.wantGranted, tc.wantAllocated, tc.wantPending}, []any{res.Granted, allocated(term), pending}); diff != "" {
				t.Errorf("granted, allocated, pending (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideChanges: an update needs room only for its growth; a change
// that holds what it should is nothing; a dry run keeps nothing.
func TestDecideChanges(t *testing.T) {
	obj := route.ObjectRef{APIGroup: "x.io", Kind: "Widget", Resource: "widgets.v1.x.io", Namespace: "ns", Name: "w", UID: "obj-1"}
	cases := map[string]struct {
		old, new      int64
		limit         int64
		dryRun        bool
		wantGranted   bool
		wantDecided   bool  // the growth was decided
		wantGrowth    int64 // held as pending growth
		wantAllocated int64
		wantEntries   int
	}{
		"the same amount: nothing to do": {old: 3, new: 3, limit: 10, wantGranted: true, wantAllocated: 3},
		"growth that fits is held":       {old: 3, new: 5, limit: 10, wantGranted: true, wantDecided: true, wantGrowth: 2, wantAllocated: 5, wantEntries: 1},
		"growth beyond the limit":        {old: 3, new: 12, limit: 10, wantDecided: true, wantAllocated: 3},
		"a shrink holds nothing more":    {old: 5, new: 2, limit: 5, wantGranted: true, wantAllocated: 5, wantEntries: 1},
		"a dry run keeps nothing":        {old: 3, new: 5, limit: 10, dryRun: true, wantGranted: true, wantDecided: true, wantAllocated: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			term := newTerm(tc.limit)
			stored := rendered("w-p", "p", tc.old)
			stored.UID = "uid-old"
			stored.Status.Conditions = []metav1.Condition{{Type: quotav1alpha1.ClaimConditionGranted, Status: metav1.ConditionTrue, Reason: quotav1alpha1.ClaimReasonQuotaAvailable}}
			term.Cache.ClaimAdded(stored)
			term.Cache.Lock()
			res, entries, err := term.decideChangesLocked(obj, []route.PolicyChange{{Policy: "p", Claim: rendered("w-p", "p", tc.new)}}, tc.dryRun)
			term.Cache.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			var growth int64
			for _, e := range entries {
				for _, g := range e.Growth {
					growth += g.Amount
				}
			}
			decided := res.Changes[0].Decision != nil
			if diff := cmp.Diff([]any{tc.wantGranted, tc.wantDecided, tc.wantGrowth, tc.wantAllocated, tc.wantEntries},
				[]any{res.Granted, decided, growth, allocated(term), len(entries)}); diff != "" {
				t.Errorf("granted, growth, allocated, entries (-want +got):\n%s", diff)
			}
			if len(entries) == 1 && (entries[0].Name == "w-p" || entries[0].Replaces[0].UID != "uid-old") {
				t.Errorf("the replacement %q replaces %+v; want a new name replacing uid-old", entries[0].Name, entries[0].Replaces)
			}
		})
	}
}

// TestAHandleWithoutATermIsNotTheLeader: admission is told to retry.
func TestAHandleWithoutATermIsNotTheLeader(t *testing.T) {
	h := route.NewHandle()
	if _, err := h.DecideCreate(context.Background(), []*quotav1alpha1.ResourceClaim{rendered("a", "p", 1)}, false); !errors.Is(err, route.ErrNotLeader) {
		t.Errorf("DecideCreate: %v; want route.ErrNotLeader", err)
	}
	if _, err := h.DecideUpdate(context.Background(), route.ObjectRef{UID: "x"}, nil, false); !errors.Is(err, route.ErrNotLeader) {
		t.Errorf("DecideUpdate: %v; want route.ErrNotLeader", err)
	}
	h.RecordRefusal(route.Refusal{}) // recorded nowhere, without a panic
}
