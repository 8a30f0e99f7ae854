package accounting

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/quotatest"

	"github.com/google/go-cmp/cmp"
)

var (
	org     = quotatest.Org()
	orgType = quotatest.OrgKind()
	project = quotatest.ProjectKind()
	t0      = quotatest.Created()
)

func reg(name, rt string) quota.Registration {
	return quota.Registration{Name: name, Created: t0, ResourceType: rt, ConsumerType: orgType, BaseUnit: "unit", Claiming: []quota.GroupKind{project}}
}

func grant(uid string, c quota.ConsumerID, rt string, buckets ...quota.GrantBucket) quota.Grant {
	return quota.Grant{UID: uid, Namespace: "ns", Name: uid, Consumer: c, Allowances: []quota.Allowance{{ResourceType: rt, Buckets: buckets}}}
}

func claim(uid string, seq int, c quota.ConsumerID, reqs ...quota.Request) quota.Claim {
	return quota.Claim{UID: uid, Namespace: "ns", Name: uid, Created: t0.Add(time.Duration(seq) * time.Second), Consumer: c, Requests: reqs}
}

func dims(kv ...string) quota.Dimensions {
	var d []quota.Dim
	for i := 0; i < len(kv); i += 2 {
		d = append(d, quota.Dim{Key: kv[i], Value: kv[i+1]})
	}
	return quota.NewDimensions(d...)
}

func outcomes(e *Accounts, uids ...string) []quota.Outcome {
	out := make([]quota.Outcome, len(uids))
	for i, u := range uids {
		d, _ := e.Decision(u)
		out[i] = d.Outcome
	}
	return out
}

type numbers struct{ Limit, Allocated, Available int64 }

func nums(t *testing.T, e *Accounts, c quota.ConsumerID, rt string, d quota.Dimensions) numbers {
	t.Helper()
	b, ok := e.Bucket(quota.BucketID{Consumer: c, ResourceType: rt, Dims: d.Key()})
	if !ok {
		t.Fatalf("bucket %s %s %q does not exist", c, rt, d.Key())
	}
	return numbers{b.Limit, b.Allocated, b.Available()}
}

func TestMultiRequestClaimIsAllOrNothing(t *testing.T) {
	e := New()
	for _, rt := range []string{"x.io/a", "x.io/b", "x.io/c"} {
		e.UpsertRegistration(reg(rt, rt))
	}
	e.UpsertGrant(quota.Grant{UID: "g", Consumer: org, Allowances: []quota.Allowance{
		{ResourceType: "x.io/a", Buckets: []quota.GrantBucket{{Amount: 10}}},
		{ResourceType: "x.io/b", Buckets: []quota.GrantBucket{{Amount: 10}}},
		{ResourceType: "x.io/c", Buckets: []quota.GrantBucket{{Amount: 1}}},
	}})
	e.AddClaim(claim("fits", 1, org, quota.Request{ResourceType: "x.io/a", Amount: 5, Dims: nil}, quota.Request{ResourceType: "x.io/b", Amount: 5, Dims: nil}, quota.Request{ResourceType: "x.io/c", Amount: 1, Dims: nil}))
	e.AddClaim(claim("too-big", 2, org, quota.Request{ResourceType: "x.io/a", Amount: 5, Dims: nil}, quota.Request{ResourceType: "x.io/b", Amount: 5, Dims: nil}, quota.Request{ResourceType: "x.io/c", Amount: 1, Dims: nil}))
	e.Decide()

	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.QuotaExceeded}, outcomes(e, "fits", "too-big")); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	for rt, want := range map[string]numbers{"x.io/a": {10, 5, 5}, "x.io/b": {10, 5, 5}, "x.io/c": {1, 1, 0}} {
		if diff := cmp.Diff(want, nums(t, e, org, rt, nil)); diff != "" {
			t.Errorf("%s: the denied claim holds something (-want +got):\n%s", rt, diff)
		}
	}
	d, _ := e.Decision("too-big")
	got := []string{d.Requests[0].Reason, d.Requests[1].Reason, d.Requests[2].Reason}
	if diff := cmp.Diff([]string{quota.ReasonClaimDenied, quota.ReasonClaimDenied, quota.ReasonQuotaExceeded}, got); diff != "" {
		t.Errorf("request reasons (-want +got):\n%s", diff)
	}
	for _, r := range d.Requests {
		if r.Allocated != 0 {
			t.Errorf("denied request %s allocated %d", r.ResourceType, r.Allocated)
		}
	}
}

func TestDimensionsNestedLimits(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	// 20 instances overall, 5 in dfw.
	e.UpsertGrant(grant("g", org, "compute.io/instances", quota.GrantBucket{Amount: 20}, quota.GrantBucket{Amount: 5, Dims: dims("location", "dfw")}))
	var uids []string
	for i := range 7 {
		uid := fmt.Sprintf("dfw-%d", i)
		uids = append(uids, uid)
		e.AddClaim(claim(uid, i, org, quota.Request{ResourceType: "compute.io/instances", Amount: 1, Dims: dims("location", "dfw", "type", "small")}))
	}
	for i := range 17 {
		uid := fmt.Sprintf("iad-%d", i)
		uids = append(uids, uid)
		e.AddClaim(claim(uid, 100+i, org, quota.Request{ResourceType: "compute.io/instances", Amount: 1, Dims: dims("location", "iad")}))
	}
	e.Decide()
	granted := map[quota.Outcome]int{}
	for _, o := range outcomes(e, uids...) {
		granted[o]++
	}
	if diff := cmp.Diff(map[quota.Outcome]int{quota.Granted: 20, quota.QuotaExceeded: 4}, granted); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(numbers{5, 5, 0}, nums(t, e, org, "compute.io/instances", dims("location", "dfw"))); diff != "" {
		t.Errorf("dfw bucket (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(numbers{20, 20, 0}, nums(t, e, org, "compute.io/instances", nil)); diff != "" {
		t.Errorf("overall bucket (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]quota.Outcome{quota.QuotaExceeded, quota.QuotaExceeded}, outcomes(e, "dfw-5", "dfw-6")); diff != "" {
		t.Errorf("dfw claims past 5 (-want +got):\n%s", diff)
	}
}

func TestNewDimensionBucketCountsExistingAllocations(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	e.UpsertGrant(grant("g", org, "compute.io/instances", quota.GrantBucket{Amount: 20}))
	for i := range 4 {
		e.AddClaim(claim(fmt.Sprint(i), i, org, quota.Request{ResourceType: "compute.io/instances", Amount: 1, Dims: dims("location", "dfw")}))
	}
	e.Decide()
	e.UpsertGrant(grant("g2", org, "compute.io/instances", quota.GrantBucket{Amount: 3, Dims: dims("location", "dfw")}))
	if diff := cmp.Diff(numbers{3, 4, 0}, nums(t, e, org, "compute.io/instances", dims("location", "dfw"))); diff != "" {
		t.Errorf("a new dfw bucket must count the 4 dfw claims already granted (-want +got):\n%s", diff)
	}
	e.AddClaim(claim("next", 10, org, quota.Request{ResourceType: "compute.io/instances", Amount: 1, Dims: dims("location", "dfw")}))
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.QuotaExceeded}, outcomes(e, "next")); diff != "" {
		t.Error(diff)
	}
}

func TestLoweredLimitRevokesNothing(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 10}))
	for i := range 8 {
		e.AddClaim(claim(fmt.Sprint(i), i, org, quota.Request{ResourceType: "x.io/p", Amount: 1, Dims: nil}))
	}
	e.Decide()
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 5}))
	e.Decide()
	b, _ := e.Bucket(quota.BucketID{Consumer: org, ResourceType: "x.io/p", Dims: ""})
	if diff := cmp.Diff(numbers{5, 8, 0}, numbers{b.Limit, b.Allocated, b.Available()}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !b.OverLimit() {
		t.Error("bucket should say it is over its limit")
	}
	for _, o := range outcomes(e, "0", "7") {
		if o != quota.Granted {
			t.Errorf("a lowered limit revoked a claim: %s", o)
		}
	}
}

func TestReleaseReevaluatesWaitingClaimsInCreationOrder(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 2}))
	for i, uid := range []string{"a", "b", "c", "d"} {
		e.AddClaim(claim(uid, i, org, quota.Request{ResourceType: "x.io/p", Amount: 1, Dims: nil}))
	}
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.Granted, quota.QuotaExceeded, quota.QuotaExceeded}, outcomes(e, "a", "b", "c", "d")); diff != "" {
		t.Fatal(diff)
	}
	e.RemoveClaim("a")
	changed := e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.QuotaExceeded}, outcomes(e, "c", "d")); diff != "" {
		t.Errorf("the oldest waiting claim goes first (-want +got):\n%s", diff)
	}
	if len(changed) != 1 || changed[0].UID != "c" {
		t.Errorf("changed = %+v, want only c", changed)
	}
	// A grant raise lets the last one in.
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 3}))
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.Granted}, outcomes(e, "d")); diff != "" {
		t.Error(diff)
	}
}

func TestValidationFailures(t *testing.T) {
	other := quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: "p"}
	pod := &quota.GroupKind{Group: "", Kind: "Pod"}
	for _, tc := range []struct {
		name  string
		claim quota.Claim
		want  string
	}{
		{"unregistered type", claim("u", 1, org, quota.Request{ResourceType: "nope.io/x", Amount: 1, Dims: nil}), "resource type nope.io/x is not registered"},
		{"consumer type mismatch", claim("u", 1, other, quota.Request{ResourceType: "x.io/p", Amount: 1, Dims: nil}), "cannot claim x.io/p: ResourceRegistration p charges Organization.resourcemanager.miloapis.com consumers"},
		{"resourceRef kind not claiming", func() quota.Claim {
			c := claim("u", 1, org, quota.Request{ResourceType: "x.io/p", Amount: 1, Dims: nil})
			c.ResourceRef = pod
			return c
		}(), "Pod objects may not claim x.io/p"},
		{"duplicate resource type", claim("u", 1, org, quota.Request{ResourceType: "x.io/p", Amount: 1, Dims: nil}, quota.Request{ResourceType: "x.io/p", Amount: 2, Dims: nil}), "requested twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New()
			e.UpsertRegistration(reg("p", "x.io/p"))
			e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 10}))
			e.AddClaim(tc.claim)
			e.Decide()
			d, _ := e.Decision("u")
			if d.Outcome != quota.ValidationFailed || d.Requests[0].Reason != quota.ReasonValidationFailed {
				t.Fatalf("outcome %s / %s, want ValidationFailed", d.Outcome, d.Requests[0].Reason)
			}
			if !strings.Contains(d.Message, tc.want) {
				t.Errorf("message %q does not say %q", d.Message, tc.want)
			}
		})
	}
}

func TestExceededMessageSaysWhatToDo(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 5}))
	e.AddClaim(claim("a", 1, org, quota.Request{ResourceType: "x.io/p", Amount: 3, Dims: nil}))
	e.AddClaim(claim("b", 2, org, quota.Request{ResourceType: "x.io/p", Amount: 3, Dims: nil}))
	e.Decide()
	d, _ := e.Decision("b")
	for _, want := range []string{"requested 3 units of x.io/p", "only 2 of the limit 5 is available", "3 allocated", "ResourceGrant for Organization.resourcemanager.miloapis.com acme"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q lacks %q", d.Message, want)
		}
	}
}

func TestDecideTogetherIsAllOrNothing(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("a", "x.io/a"))
	e.UpsertRegistration(reg("b", "x.io/b"))
	e.UpsertGrant(quota.Grant{UID: "g", Consumer: org, Allowances: []quota.Allowance{
		{ResourceType: "x.io/a", Buckets: []quota.GrantBucket{{Amount: 5}}},
		{ResourceType: "x.io/b", Buckets: []quota.GrantBucket{{Amount: 1}}},
	}})
	e.AddClaim(claim("p1", 1, org, quota.Request{ResourceType: "x.io/a", Amount: 3, Dims: nil}))
	e.AddClaim(claim("p2", 2, org, quota.Request{ResourceType: "x.io/b", Amount: 2, Dims: nil}))
	if _, ok := e.DecideTogether([]string{"p1", "p2"}); ok {
		t.Fatal("granted although p2 does not fit")
	}
	if diff := cmp.Diff(numbers{5, 0, 5}, nums(t, e, org, "x.io/a", nil)); diff != "" {
		t.Errorf("p1's allocation was not undone (-want +got):\n%s", diff)
	}
	e.AddClaim(claim("p3", 3, org, quota.Request{ResourceType: "x.io/b", Amount: 1, Dims: nil}))
	if _, ok := e.DecideTogether([]string{"p1", "p3"}); !ok {
		t.Fatal("denied although both fit")
	}
	if diff := cmp.Diff(numbers{5, 3, 2}, nums(t, e, org, "x.io/a", nil)); diff != "" {
		t.Error(diff)
	}
}

func TestDecideUpToBoundsGrants(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 100}))
	for i := range 10 {
		e.AddClaim(claim(fmt.Sprint(i), i, org, quota.Request{ResourceType: "x.io/p", Amount: 1, Dims: nil}))
	}
	got, more := e.DecideUpTo(4)
	if len(got) != 4 || !more {
		t.Fatalf("first call granted %d (more=%v), want 4 and more", len(got), more)
	}
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.Granted, quota.Granted, quota.Granted, quota.Pending}, outcomes(e, "0", "1", "2", "3", "4")); diff != "" {
		t.Errorf("creation order (-want +got):\n%s", diff)
	}
	got, more = e.DecideUpTo(100)
	if len(got) != 6 || more {
		t.Fatalf("second call granted %d (more=%v), want the other 6", len(got), more)
	}
}

func TestRekeyMovesTheAllocation(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 2}))
	e.AddClaim(claim("provisional", 1, org, quota.Request{ResourceType: "x.io/p", Amount: 2, Dims: nil}))
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
