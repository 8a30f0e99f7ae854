package quota

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	org     = ConsumerID{APIGroup: OrganizationGroup, Kind: "Organization", Name: "acme"}
	orgType = GroupKind{OrganizationGroup, "Organization"}
	project = GroupKind{OrganizationGroup, "Project"}
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func reg(name, rt string) Registration {
	return Registration{Name: name, Created: t0, ResourceType: rt, ConsumerType: orgType, BaseUnit: "unit", Claiming: []GroupKind{project}}
}

func grant(uid string, c ConsumerID, rt string, buckets ...GrantBucket) Grant {
	return Grant{UID: uid, Namespace: "ns", Name: uid, Consumer: c, Allowances: []Allowance{{ResourceType: rt, Buckets: buckets}}}
}

func claim(uid string, seq int, c ConsumerID, reqs ...Request) Claim {
	return Claim{UID: uid, Namespace: "ns", Name: uid, Created: t0.Add(time.Duration(seq) * time.Second), Consumer: c, Requests: reqs}
}

func dims(kv ...string) Dimensions {
	var d []Dim
	for i := 0; i < len(kv); i += 2 {
		d = append(d, Dim{kv[i], kv[i+1]})
	}
	return NewDimensions(d...)
}

func outcomes(e *Engine, uids ...string) []Outcome {
	out := make([]Outcome, len(uids))
	for i, u := range uids {
		d, _ := e.Decision(u)
		out[i] = d.Outcome
	}
	return out
}

type numbers struct{ Limit, Allocated, Available int64 }

func nums(t *testing.T, e *Engine, c ConsumerID, rt string, d Dimensions) numbers {
	t.Helper()
	b, ok := e.Bucket(BucketID{c, rt, d.Key()})
	if !ok {
		t.Fatalf("bucket %s %s %q does not exist", c, rt, d.Key())
	}
	return numbers{b.Limit, b.Allocated, b.Available()}
}

func TestMultiRequestClaimIsAllOrNothing(t *testing.T) {
	e := NewEngine()
	for _, rt := range []string{"x.io/a", "x.io/b", "x.io/c"} {
		e.UpsertRegistration(reg(rt, rt))
	}
	e.UpsertGrant(Grant{UID: "g", Consumer: org, Allowances: []Allowance{
		{ResourceType: "x.io/a", Buckets: []GrantBucket{{Amount: 10}}},
		{ResourceType: "x.io/b", Buckets: []GrantBucket{{Amount: 10}}},
		{ResourceType: "x.io/c", Buckets: []GrantBucket{{Amount: 1}}},
	}})
	e.AddClaim(claim("fits", 1, org, Request{"x.io/a", 5, nil}, Request{"x.io/b", 5, nil}, Request{"x.io/c", 1, nil}))
	e.AddClaim(claim("too-big", 2, org, Request{"x.io/a", 5, nil}, Request{"x.io/b", 5, nil}, Request{"x.io/c", 1, nil}))
	e.Decide()

	if diff := cmp.Diff([]Outcome{Granted, QuotaExceeded}, outcomes(e, "fits", "too-big")); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	for rt, want := range map[string]numbers{"x.io/a": {10, 5, 5}, "x.io/b": {10, 5, 5}, "x.io/c": {1, 1, 0}} {
		if diff := cmp.Diff(want, nums(t, e, org, rt, nil)); diff != "" {
			t.Errorf("%s: the denied claim holds something (-want +got):\n%s", rt, diff)
		}
	}
	d, _ := e.Decision("too-big")
	got := []string{d.Requests[0].Reason, d.Requests[1].Reason, d.Requests[2].Reason}
	if diff := cmp.Diff([]string{ReasonClaimDenied, ReasonClaimDenied, ReasonQuotaExceeded}, got); diff != "" {
		t.Errorf("request reasons (-want +got):\n%s", diff)
	}
	for _, r := range d.Requests {
		if r.Allocated != 0 {
			t.Errorf("denied request %s allocated %d", r.ResourceType, r.Allocated)
		}
	}
}

func TestDimensionsNestedLimits(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	// 20 instances overall, 5 in dfw.
	e.UpsertGrant(grant("g", org, "compute.io/instances", GrantBucket{Amount: 20}, GrantBucket{Amount: 5, Dims: dims("location", "dfw")}))
	var uids []string
	for i := range 7 {
		uid := fmt.Sprintf("dfw-%d", i)
		uids = append(uids, uid)
		e.AddClaim(claim(uid, i, org, Request{"compute.io/instances", 1, dims("location", "dfw", "type", "small")}))
	}
	for i := range 17 {
		uid := fmt.Sprintf("iad-%d", i)
		uids = append(uids, uid)
		e.AddClaim(claim(uid, 100+i, org, Request{"compute.io/instances", 1, dims("location", "iad")}))
	}
	e.Decide()
	granted := map[Outcome]int{}
	for _, o := range outcomes(e, uids...) {
		granted[o]++
	}
	if diff := cmp.Diff(map[Outcome]int{Granted: 20, QuotaExceeded: 4}, granted); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(numbers{5, 5, 0}, nums(t, e, org, "compute.io/instances", dims("location", "dfw"))); diff != "" {
		t.Errorf("dfw bucket (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(numbers{20, 20, 0}, nums(t, e, org, "compute.io/instances", nil)); diff != "" {
		t.Errorf("overall bucket (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Outcome{QuotaExceeded, QuotaExceeded}, outcomes(e, "dfw-5", "dfw-6")); diff != "" {
		t.Errorf("dfw claims past 5 (-want +got):\n%s", diff)
	}
}

func TestNewDimensionBucketCountsExistingAllocations(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	e.UpsertGrant(grant("g", org, "compute.io/instances", GrantBucket{Amount: 20}))
	for i := range 4 {
		e.AddClaim(claim(fmt.Sprint(i), i, org, Request{"compute.io/instances", 1, dims("location", "dfw")}))
	}
	e.Decide()
	e.UpsertGrant(grant("g2", org, "compute.io/instances", GrantBucket{Amount: 3, Dims: dims("location", "dfw")}))
	if diff := cmp.Diff(numbers{3, 4, 0}, nums(t, e, org, "compute.io/instances", dims("location", "dfw"))); diff != "" {
		t.Errorf("a new dfw bucket must count the 4 dfw claims already granted (-want +got):\n%s", diff)
	}
	e.AddClaim(claim("next", 10, org, Request{"compute.io/instances", 1, dims("location", "dfw")}))
	e.Decide()
	if diff := cmp.Diff([]Outcome{QuotaExceeded}, outcomes(e, "next")); diff != "" {
		t.Error(diff)
	}
}

func TestLoweredLimitRevokesNothing(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 10}))
	for i := range 8 {
		e.AddClaim(claim(fmt.Sprint(i), i, org, Request{"x.io/p", 1, nil}))
	}
	e.Decide()
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 5}))
	e.Decide()
	b, _ := e.Bucket(BucketID{org, "x.io/p", ""})
	if diff := cmp.Diff(numbers{5, 8, 0}, numbers{b.Limit, b.Allocated, b.Available()}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !b.OverLimit() {
		t.Error("bucket should say it is over its limit")
	}
	for _, o := range outcomes(e, "0", "7") {
		if o != Granted {
			t.Errorf("a lowered limit revoked a claim: %s", o)
		}
	}
}

func TestReleaseReevaluatesWaitingClaimsInCreationOrder(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 2}))
	for i, uid := range []string{"a", "b", "c", "d"} {
		e.AddClaim(claim(uid, i, org, Request{"x.io/p", 1, nil}))
	}
	e.Decide()
	if diff := cmp.Diff([]Outcome{Granted, Granted, QuotaExceeded, QuotaExceeded}, outcomes(e, "a", "b", "c", "d")); diff != "" {
		t.Fatal(diff)
	}
	e.RemoveClaim("a")
	changed := e.Decide()
	if diff := cmp.Diff([]Outcome{Granted, QuotaExceeded}, outcomes(e, "c", "d")); diff != "" {
		t.Errorf("the oldest waiting claim goes first (-want +got):\n%s", diff)
	}
	if len(changed) != 1 || changed[0].UID != "c" {
		t.Errorf("changed = %+v, want only c", changed)
	}
	// A grant raise lets the last one in.
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 3}))
	e.Decide()
	if diff := cmp.Diff([]Outcome{Granted}, outcomes(e, "d")); diff != "" {
		t.Error(diff)
	}
}

func TestValidationFailures(t *testing.T) {
	other := ConsumerID{APIGroup: OrganizationGroup, Kind: "Project", Name: "p"}
	pod := &GroupKind{"", "Pod"}
	for _, tc := range []struct {
		name  string
		claim Claim
		want  string
	}{
		{"unregistered type", claim("u", 1, org, Request{"nope.io/x", 1, nil}), "resource type nope.io/x is not registered"},
		{"consumer type mismatch", claim("u", 1, other, Request{"x.io/p", 1, nil}), "cannot claim x.io/p: ResourceRegistration p charges Organization.resourcemanager.miloapis.com consumers"},
		{"resourceRef kind not claiming", func() Claim { c := claim("u", 1, org, Request{"x.io/p", 1, nil}); c.ResourceRef = pod; return c }(), "Pod objects may not claim x.io/p"},
		{"duplicate resource type", claim("u", 1, org, Request{"x.io/p", 1, nil}, Request{"x.io/p", 2, nil}), "requested twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEngine()
			e.UpsertRegistration(reg("p", "x.io/p"))
			e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 10}))
			e.AddClaim(tc.claim)
			e.Decide()
			d, _ := e.Decision("u")
			if d.Outcome != ValidationFailed || d.Requests[0].Reason != ReasonValidationFailed {
				t.Fatalf("outcome %s / %s, want ValidationFailed", d.Outcome, d.Requests[0].Reason)
			}
			if !strings.Contains(d.Message, tc.want) {
				t.Errorf("message %q does not say %q", d.Message, tc.want)
			}
		})
	}
}

func TestExceededMessageSaysWhatToDo(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 5}))
	e.AddClaim(claim("a", 1, org, Request{"x.io/p", 3, nil}))
	e.AddClaim(claim("b", 2, org, Request{"x.io/p", 3, nil}))
	e.Decide()
	d, _ := e.Decision("b")
	for _, want := range []string{"requested 3 unit of x.io/p", "only 2 of the limit 5 is available", "3 allocated", "ResourceGrant for Organization.resourcemanager.miloapis.com acme"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q lacks %q", d.Message, want)
		}
	}
}

func TestDuplicateRegistrationIsInactive(t *testing.T) {
	e := NewEngine()
	first := reg("first", "x.io/p")
	second := reg("second", "x.io/p")
	second.Created = t0.Add(time.Second)
	e.UpsertRegistration(second)
	e.UpsertRegistration(first)
	if v := e.RegistrationValidity("first"); !v.Valid {
		t.Errorf("first: %+v", v)
	}
	if v := e.RegistrationValidity("second"); v.Valid || v.Reason != ReasonValidationFailed || v.Cause != CauseDuplicateResourceType || !strings.Contains(v.Message, "first") {
		t.Errorf("second: %+v", v)
	}
}

func TestInvalidGrantContributesNothing(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("p", "x.io/p"))
	proj := ConsumerID{APIGroup: OrganizationGroup, Kind: "Project", Name: "x"}
	e.UpsertGrant(grant("bad", proj, "x.io/p", GrantBucket{Amount: 5}))
	v, _ := e.GrantValidity("bad")
	if v.Valid || v.Reason != ReasonValidationFailed || v.Cause != CauseConsumerTypeMismatch {
		t.Errorf("validity %+v", v)
	}
	if _, ok := e.Bucket(BucketID{proj, "x.io/p", ""}); ok {
		t.Error("an invalid grant created a bucket")
	}
	// The registration disappears: a valid grant becomes invalid and its limit goes.
	e.UpsertGrant(grant("good", org, "x.io/p", GrantBucket{Amount: 5}))
	e.RemoveRegistration("p")
	if v, _ := e.GrantValidity("good"); v.Valid || v.Reason != ReasonValidationFailed || v.Cause != CauseResourceTypeNotRegistered {
		t.Errorf("after the registration is deleted: %+v", v)
	}
}

func TestDecideTogetherIsAllOrNothing(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("a", "x.io/a"))
	e.UpsertRegistration(reg("b", "x.io/b"))
	e.UpsertGrant(Grant{UID: "g", Consumer: org, Allowances: []Allowance{
		{ResourceType: "x.io/a", Buckets: []GrantBucket{{Amount: 5}}},
		{ResourceType: "x.io/b", Buckets: []GrantBucket{{Amount: 1}}},
	}})
	e.AddClaim(claim("p1", 1, org, Request{"x.io/a", 3, nil}))
	e.AddClaim(claim("p2", 2, org, Request{"x.io/b", 2, nil}))
	if _, ok := e.DecideTogether([]string{"p1", "p2"}); ok {
		t.Fatal("granted although p2 does not fit")
	}
	if diff := cmp.Diff(numbers{5, 0, 5}, nums(t, e, org, "x.io/a", nil)); diff != "" {
		t.Errorf("p1's allocation was not undone (-want +got):\n%s", diff)
	}
	e.AddClaim(claim("p3", 3, org, Request{"x.io/b", 1, nil}))
	if _, ok := e.DecideTogether([]string{"p1", "p3"}); !ok {
		t.Fatal("denied although both fit")
	}
	if diff := cmp.Diff(numbers{5, 3, 2}, nums(t, e, org, "x.io/a", nil)); diff != "" {
		t.Error(diff)
	}
}

func TestDecideUpToBoundsGrants(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 100}))
	for i := range 10 {
		e.AddClaim(claim(fmt.Sprint(i), i, org, Request{"x.io/p", 1, nil}))
	}
	got, more := e.DecideUpTo(4)
	if len(got) != 4 || !more {
		t.Fatalf("first call granted %d (more=%v), want 4 and more", len(got), more)
	}
	if diff := cmp.Diff([]Outcome{Granted, Granted, Granted, Granted, Pending}, outcomes(e, "0", "1", "2", "3", "4")); diff != "" {
		t.Errorf("creation order (-want +got):\n%s", diff)
	}
	got, more = e.DecideUpTo(100)
	if len(got) != 6 || more {
		t.Fatalf("second call granted %d (more=%v), want the other 6", len(got), more)
	}
}

func TestRekeyMovesTheAllocation(t *testing.T) {
	e := NewEngine()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", GrantBucket{Amount: 2}))
	e.AddClaim(claim("provisional", 1, org, Request{"x.io/p", 2, nil}))
	if _, ok := e.DecideTogether([]string{"provisional"}); !ok {
		t.Fatal("not granted")
	}
	if !e.Rekey("provisional", "real") {
		t.Fatal("rekey failed")
	}
	e.RemoveClaim("real")
	if diff := cmp.Diff(numbers{2, 0, 2}, nums(t, e, org, "x.io/p", nil)); diff != "" {
		t.Errorf("releasing the renamed claim (-want +got):\n%s", diff)
	}
}
