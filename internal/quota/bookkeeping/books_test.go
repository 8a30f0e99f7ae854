package bookkeeping

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/quotatest"
)

// dfw is the dimensions of a bucket for one location.
var dfw = quota.NewDimensions(quota.Dim{Key: "location", Value: "dfw"})

// registration charges resourceType to consumers of kind, and to levels.
func registration(name, resourceType string, kind quota.GroupKind, levels ...quota.GroupKind) quota.Registration {
	return quota.Registration{Name: name, Created: quotatest.Created(), ResourceType: resourceType, ConsumerType: kind, BaseUnit: "unit", Levels: levels}
}

// grantOf gives c the buckets of one resource type.
func grantOf(uid string, c quota.ConsumerID, resourceType string, buckets ...quota.GrantBucket) quota.Grant {
	allowance := quota.Allowance{ResourceType: resourceType, Buckets: buckets}
	return quota.Grant{UID: uid, Namespace: "ns", Name: uid, Consumer: c, Allowances: []quota.Allowance{allowance}}
}

type numbers struct {
	Limit, Allocated int64
	Claims           int32
	Clusters         map[string]int64
}

func numbersOf(t *testing.T, bk *Books, c quota.ConsumerID, rt string, d quota.Dimensions) numbers {
	t.Helper()
	st, ok := bk.Bucket(quota.BucketID{Consumer: c, ResourceType: rt, Dims: d.Key()})
	if !ok {
		t.Fatalf("no bucket %s %s %q", c, rt, d.Key())
	}
	return numbers{st.Limit, st.Allocated, st.Claims, st.Clusters}
}

func TestDuplicateRegistrationIsInactive(t *testing.T) {
	bk := New()
	first := registration("first", "x.io/p", quotatest.OrgKind())
	second := registration("second", "x.io/p", quotatest.OrgKind())
	second.Created = quotatest.Created().Add(time.Second)
	bk.UpsertRegistration(second)
	bk.UpsertRegistration(first)
	if v := bk.RegistrationValidity("first"); !v.Valid {
		t.Errorf("first: %+v", v)
	}
	if v := bk.RegistrationValidity("second"); v.Valid || v.Reason != quota.ReasonValidationFailed || v.Cause != quota.CauseDuplicateResourceType || !strings.Contains(v.Message, "first") {
		t.Errorf("second: %+v", v)
	}
}

func TestInvalidGrantContributesNothing(t *testing.T) {
	bk := New()
	bk.UpsertRegistration(registration("p", "x.io/p", quotatest.OrgKind()))
	project := quotatest.Project("x")
	if v := bk.UpsertGrant(grantOf("bad", project, "x.io/p", quota.GrantBucket{Amount: 5})); v.Valid || v.Reason != quota.ReasonValidationFailed || v.Cause != quota.CauseConsumerTypeMismatch {
		t.Errorf("validity %+v", v)
	}
	if _, ok := bk.Bucket(quota.BucketID{Consumer: project, ResourceType: "x.io/p", Dims: ""}); ok {
		t.Error("an invalid grant created a bucket")
	}
	// The registration disappears: a valid grant becomes invalid and its limit goes.
	bk.UpsertGrant(grantOf("good", quotatest.Org(), "x.io/p", quota.GrantBucket{Amount: 5}))
	if !bk.RemoveRegistration("p") {
		t.Fatal("a known registration was not removed")
	}
	if v, _ := bk.GrantValidity("good"); v.Valid || v.Reason != quota.ReasonValidationFailed || v.Cause != quota.CauseResourceTypeNotRegistered {
		t.Errorf("after the registration is deleted: %+v", v)
	}
	if _, ok := bk.Bucket(quota.BucketID{Consumer: quotatest.Org(), ResourceType: "x.io/p", Dims: ""}); ok {
		t.Error("a grant made invalid kept its bucket")
	}
}

// TestChargeCountsEveryCoveringBucket: a granted request is counted in each
// bucket whose dimensions it has, with its member cluster, and Uncharge
// takes exactly that back.
func TestChargeCountsEveryCoveringBucket(t *testing.T) {
	const rt = "x.io/p"
	bk := New()
	bk.UpsertRegistration(registration("p", rt, quotatest.OrgKind()))
	bk.UpsertGrant(grantOf("g", quotatest.Org(), rt, quota.GrantBucket{Amount: 10}, quota.GrantBucket{Amount: 4, Dims: dfw}))
	s := bk.SeriesFor(Key{Consumer: quotatest.Org(), ResourceType: rt})
	inDFW := quota.Request{ResourceType: rt, Amount: 3, Dims: quota.NewDimensions(quota.Dim{Key: "location", Value: "dfw"}, quota.Dim{Key: "size", Value: "small"})}
	elsewhere := quota.Request{ResourceType: rt, Amount: 2, Dims: quota.NewDimensions(quota.Dim{Key: "location", Value: "iad"})}
	bk.Charge(s, "c1", "east", inDFW)
	bk.Charge(s, "c2", "", elsewhere)
	if diff := cmp.Diff(numbers{Limit: 10, Allocated: 5, Claims: 2, Clusters: map[string]int64{"east": 3}}, numbersOf(t, bk, quotatest.Org(), rt, nil)); diff != "" {
		t.Errorf("overall bucket (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(numbers{Limit: 4, Allocated: 3, Claims: 1, Clusters: map[string]int64{"east": 3}}, numbersOf(t, bk, quotatest.Org(), rt, dfw)); diff != "" {
		t.Errorf("dfw bucket (-want +got):\n%s", diff)
	}
	if b := s.Short(quota.Request{ResourceType: rt, Amount: 2, Dims: inDFW.Dims}); b == nil || b.Dims().Key() != dfw.Key() {
		t.Errorf("2 more in dfw: short bucket %v, want dfw's (1 left)", b)
	}
	bk.Uncharge(s, "c1", inDFW)
	if diff := cmp.Diff(numbers{Limit: 10, Allocated: 2, Claims: 1}, numbersOf(t, bk, quotatest.Org(), rt, nil)); diff != "" {
		t.Errorf("overall bucket after c1 is released (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(numbers{Limit: 4}, numbersOf(t, bk, quotatest.Org(), rt, dfw)); diff != "" {
		t.Errorf("dfw bucket after c1 is released (-want +got):\n%s", diff)
	}
}

// TestPruneDropsWhatNothingRefersTo: a series lives while a claim refers to
// it; once dropped, Drops says so, and pruning it again leaves alone the
// series that took its key.
func TestPruneDropsWhatNothingRefersTo(t *testing.T) {
	const rt = "x.io/p"
	bk := New()
	bk.UpsertRegistration(registration("p", rt, quotatest.OrgKind()))
	k := Key{Consumer: quotatest.Org(), ResourceType: rt}
	overall := quota.BucketID{Consumer: quotatest.Org(), ResourceType: rt}
	s := bk.SeriesFor(k)
	s.Ref()
	bk.Prune(s)
	if _, ok := bk.Bucket(overall); !ok || bk.Drops() != 0 {
		t.Fatalf("a series a claim refers to was dropped (drops %d)", bk.Drops())
	}
	s.Unref()
	bk.Prune(s)
	if _, ok := bk.Bucket(overall); ok || bk.Drops() != 1 {
		t.Fatalf("a series nothing refers to was kept (drops %d)", bk.Drops())
	}
	again := bk.SeriesFor(k)
	bk.Prune(s)
	if _, ok := bk.Bucket(overall); !ok || bk.Drops() != 1 {
		t.Fatalf("pruning a dropped series dropped the one that took its key (drops %d)", bk.Drops())
	}
	again.Ref()
	bk.UpsertGrant(grantOf("g", quotatest.Org(), rt, quota.GrantBucket{Amount: 4, Dims: dfw}))
	if _, ok := bk.Bucket(quota.BucketID{Consumer: quotatest.Org(), ResourceType: rt, Dims: dfw.Key()}); !ok {
		t.Fatal("a grant's dimensioned bucket is missing")
	}
	bk.RemoveGrant("g")
	if _, ok := bk.Bucket(quota.BucketID{Consumer: quotatest.Org(), ResourceType: rt, Dims: dfw.Key()}); ok {
		t.Error("a dimensioned bucket no grant defines was kept")
	}
}

// TestTakeChangedReportsEachChangeOnce: what changed is reported once, and
// a bucket charged after it was taken is reported again.
func TestTakeChangedReportsEachChangeOnce(t *testing.T) {
	const rt = "x.io/p"
	bk := New()
	bk.UpsertRegistration(registration("p", rt, quotatest.OrgKind()))
	bk.UpsertGrant(grantOf("g", quotatest.Org(), rt, quota.GrantBucket{Amount: 10}))
	overall := quota.BucketID{Consumer: quotatest.Org(), ResourceType: rt}
	buckets, grants, regs := bk.TakeChanged()
	if diff := cmp.Diff([][]string{{overall.Dims}, {"g"}, {"p"}}, [][]string{dimsOf(buckets), grants, regs}); diff != "" {
		t.Errorf("first take (-want +got):\n%s", diff)
	}
	if buckets, grants, regs := bk.TakeChanged(); len(buckets)+len(grants)+len(regs) != 0 {
		t.Errorf("taken twice: %v %v %v", buckets, grants, regs)
	}
	bk.Charge(bk.SeriesFor(Key{Consumer: quotatest.Org(), ResourceType: rt}), "c", "", quota.Request{ResourceType: rt, Amount: 1})
	if buckets, _, _ := bk.TakeChanged(); !slices.Equal(buckets, []quota.BucketID{overall}) {
		t.Errorf("after a charge: %v, want the overall bucket", buckets)
	}
}

func dimsOf(ids []quota.BucketID) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, id.Dims)
	}
	return out
}

// TestOnlyRegistrationsWhoseValidityChangesAreWrittenAgain: a registration
// upserted is reported changed, and so are the other registrations of its
// resource type when the active one changes; the registrations of other
// types are not (each would be judged and written again for nothing: with
// many registrations, every status write of one came back as a change of
// all).
func TestOnlyRegistrationsWhoseValidityChangesAreWrittenAgain(t *testing.T) {
	org := quota.GroupKind{Group: quota.OrganizationGroup, Kind: "Organization"}
	bk := New()
	for i, rt := range []string{"a", "b", "c"} {
		r := registration("reg-"+rt, "example.com/"+rt, org)
		r.Created = r.Created.Add(time.Duration(i) * time.Second)
		bk.UpsertRegistration(r)
	}
	changed := func() []string {
		_, _, regs := bk.TakeChanged()
		slices.Sort(regs)
		return regs
	}
	if got := changed(); !slices.Equal(got, []string{"reg-a", "reg-b", "reg-c"}) {
		t.Fatalf("after three new registrations: %v", got)
	}
	// The same registration again (its status written): only itself.
	bk.UpsertRegistration(registration("reg-b", "example.com/b", org))
	if got := changed(); !slices.Equal(got, []string{"reg-b"}) {
		t.Fatalf("after reg-b upserted unchanged: %v; want only reg-b", got)
	}
	// A later duplicate of a's type: itself (inactive); a is still active.
	dup := registration("reg-a2", "example.com/a", org)
	dup.Created = dup.Created.Add(time.Hour)
	bk.UpsertRegistration(dup)
	if got := changed(); !slices.Equal(got, []string{"reg-a2"}) {
		t.Fatalf("after a duplicate: %v; want only reg-a2", got)
	}
	if v := bk.RegistrationValidity("reg-a2"); v.Valid || v.Cause != quota.CauseDuplicateResourceType {
		t.Fatalf("the duplicate: %+v", v)
	}
	// a deleted: its duplicate becomes active, and is reported.
	if !bk.RemoveRegistration("reg-a") {
		t.Fatal("reg-a not known")
	}
	if got := changed(); !slices.Equal(got, []string{"reg-a2"}) {
		t.Fatalf("after reg-a removed: %v; want reg-a2 (now active)", got)
	}
	if v := bk.RegistrationValidity("reg-a2"); !v.Valid {
		t.Fatalf("reg-a2 after reg-a removed: %+v", v)
	}
}

// TestABucketsGrantsAreFoundShortOrLong: a bucket keeps its grants in a
// list, indexed once long; setting, changing and removing agree with a map.
func TestABucketsGrantsAreFoundShortOrLong(t *testing.T) {
	for _, n := range []int{1, indexGrantsAbove, 3 * indexGrantsAbove} {
		b := &Bucket{}
		want := map[string]int64{}
		check := func(step string) {
			t.Helper()
			var sum int64
			for uid, a := range want {
				sum += a
				if c, _, ok := b.grant(uid); !ok || c.Amount != a {
					t.Fatalf("n=%d, %s: grant %s = %d (found %v), want %d", n, step, uid, c.Amount, ok, a)
				}
			}
			if len(b.grants) != len(want) || b.Limit() != sum {
				t.Fatalf("n=%d, %s: %d grants, limit %d; want %d, %d", n, step, len(b.grants), b.Limit(), len(want), sum)
			}
			if _, _, ok := b.grant("absent"); ok {
				t.Fatalf("n=%d, %s: a grant never set is found", n, step)
			}
		}
		for i := range n {
			uid := fmt.Sprintf("g%d", i)
			b.setGrant(uid, quota.GrantContribution{Amount: int64(i + 1)})
			want[uid] = int64(i + 1)
		}
		check("set")
		for i := 0; i < n; i += 2 {
			uid := fmt.Sprintf("g%d", i)
			if !b.removeGrant(uid) {
				t.Fatalf("n=%d: removing %s found nothing", n, uid)
			}
			delete(want, uid)
		}
		if b.removeGrant("g0") {
			t.Fatalf("n=%d: removing g0 twice found it", n)
		}
		check("removed")
		for i := 1; i < n; i += 2 {
			uid := fmt.Sprintf("g%d", i)
			b.setGrant(uid, quota.GrantContribution{Amount: 100})
			want[uid] = 100
		}
		check("changed")
	}
}
