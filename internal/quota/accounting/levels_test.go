package accounting

import (
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/bookkeeping"
	"github.com/quotaplane/quotaplane/internal/quota/quotatest"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/labels"
)

const vcpu = quotatest.VCPU

var proj = quotatest.Project

// hierarchy is an engine with vcpu charged to Projects and, a level up, to
// their Organizations; projects web and api belong to acme.
func hierarchy(t *testing.T) *Accounts {
	t.Helper()
	e := New()
	e.UpsertRegistration(quota.Registration{Name: "vcpu", Created: t0, ResourceType: vcpu, ConsumerType: project, BaseUnit: "core",
		Claiming: []quota.GroupKind{{Group: "", Kind: "ConfigMap"}}, Levels: []quota.GroupKind{orgType}})
	e.SetConsumer(org, quota.ConsumerInfo{})
	for _, p := range []string{"web", "api"} {
		e.SetConsumer(proj(p), quota.ConsumerInfo{Parent: &org, Labels: map[string]string{"quota.miloapis.com/team": "data"}})
	}
	return e
}

func group(uid string, amount int64, sel string) quota.Grant {
	s, err := labels.Parse(sel)
	if err != nil {
		panic(err)
	}
	return quota.Grant{UID: uid, Namespace: "milo-system", Name: uid, Consumer: quota.GroupID("milo-system", uid),
		Group:      &quota.Group{Kind: project, Selector: s},
		Allowances: []quota.Allowance{{ResourceType: vcpu, Buckets: []quota.GrantBucket{{Amount: amount}}}}}
}

func TestOrganizationCapsItsProjects(t *testing.T) {
	e := hierarchy(t)
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 10}))
	e.UpsertGrant(grant("web", proj("web"), vcpu, quota.GrantBucket{Amount: 8}))
	e.UpsertGrant(grant("api", proj("api"), vcpu, quota.GrantBucket{Amount: 8}))
	e.AddClaim(claim("w", 1, proj("web"), quota.Request{ResourceType: vcpu, Amount: 6, Dims: nil}))
	e.Decide()
	e.AddClaim(claim("a1", 2, proj("api"), quota.Request{ResourceType: vcpu, Amount: 4, Dims: nil}))
	e.AddClaim(claim("a2", 3, proj("api"), quota.Request{ResourceType: vcpu, Amount: 1, Dims: nil}))
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.Granted, quota.QuotaExceeded}, outcomes(e, "w", "a1", "a2")); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if got := nums(t, e, org, vcpu, nil); got != (numbers{10, 10, 0}) {
		t.Errorf("organization bucket %+v, want 10/10/0", got)
	}
	d, _ := e.Decision("a2")
	msg := d.Message
	for _, want := range []string{"requested 1 core of " + vcpu + " for Project api", "Project api has 4 of 8 available",
		"Organization acme has 0 of 10 available (this limit refused", "raise the limit with a ResourceGrant for Organization"} {
		if !strings.Contains(msg, want) {
			t.Errorf("denial %q does not say %q", msg, want)
		}
	}
	// Room at the organization decides the waiting claim again.
	e.RemoveClaim("w")
	e.Decide()
	if got := outcomes(e, "a2"); got[0] != quota.Granted {
		t.Errorf("a2 is %s after room appeared at the organization", got[0])
	}
}

func TestALevelWithoutAGrantDoesNotLimit(t *testing.T) {
	e := hierarchy(t)
	e.AddClaim(claim("none", 1, proj("web"), quota.Request{ResourceType: vcpu, Amount: 1, Dims: nil}))
	e.Decide()
	// Said plainly, naming no bucket (none is stored without a grant).
	if d, _ := e.Decision("none"); d.Outcome != quota.QuotaExceeded || !strings.Contains(d.Message, "no level of it (Project web, Organization") ||
		!strings.Contains(d.Message, "has a grant for "+vcpu+", so its limit is 0") || strings.Contains(d.Message, "bucket-") {
		t.Fatalf("no grant anywhere: %s %q, want refused saying no level has a grant, the limit 0, and no bucket name", d.Outcome, d.Message)
	}
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 3}))
	e.Decide()
	if got := outcomes(e, "none"); got[0] != quota.Granted {
		t.Fatalf("the project has no grant, its organization has room: %s", got[0])
	}
	b, _ := e.Bucket(quota.BucketID{Consumer: proj("web"), ResourceType: vcpu, Dims: ""})
	if !b.Unlimited || b.OverLimit() {
		t.Errorf("a project without a grant shows %+v; want unlimited, not over its limit", b)
	}
}

func TestTheMostRestrictiveGroupRefuses(t *testing.T) {
	e := hierarchy(t)
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 100}))
	e.UpsertGrant(group("team-data", 5, "quota.miloapis.com/team=data"))
	e.UpsertGrant(group("all", 50, "quota.miloapis.com/team"))
	// Consumers are decided in no particular order: one at a time.
	e.AddClaim(claim("w", 1, proj("web"), quota.Request{ResourceType: vcpu, Amount: 4, Dims: nil}))
	e.Decide()
	e.AddClaim(claim("a", 2, proj("api"), quota.Request{ResourceType: vcpu, Amount: 2, Dims: nil}))
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.QuotaExceeded}, outcomes(e, "w", "a")); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	d, _ := e.Decision("a")
	if !strings.Contains(d.Message, "group team-data has 1 of 5 available (this limit refused") || !strings.Contains(d.Message, "group all has 46 of 50 available") {
		t.Errorf("denial %q does not name both groups", d.Message)
	}
	// The project leaves the small group: its usage leaves with it.
	e.SetConsumer(proj("web"), quota.ConsumerInfo{Parent: &org, Labels: map[string]string{"quota.miloapis.com/team": "web"}})
	e.Decide()
	if got := nums(t, e, quota.GroupID("milo-system", "team-data"), vcpu, nil); got != (numbers{5, 2, 3}) {
		t.Errorf("team-data after web left: %+v, want 5/2/3 (api's claim granted once web left)", got)
	}
	// Back in: allocated follows, over the limit, nothing revoked.
	e.SetConsumer(proj("web"), quota.ConsumerInfo{Parent: &org, Labels: map[string]string{"quota.miloapis.com/team": "data"}})
	b, _ := e.Bucket(quota.BucketID{Consumer: quota.GroupID("milo-system", "team-data"), ResourceType: vcpu, Dims: ""})
	if b.Allocated != 6 || !b.OverLimit() {
		t.Errorf("team-data after web came back: %+v, want allocated 6, over its limit", b)
	}
	if got := outcomes(e, "w", "a"); got[0] != quota.Granted || got[1] != quota.Granted {
		t.Errorf("a membership change revoked a claim: %v", got)
	}
}

// TestLevelsFollowDroppedSeries: a claim added after the series its
// consumer's levels were cached with were dropped draws from the live ones,
// and so sees grants made since.
func TestLevelsFollowDroppedSeries(t *testing.T) {
	e := hierarchy(t)
	e.AddClaim(claim("first", 1, proj("web"), quota.Request{ResourceType: vcpu, Amount: 1}))
	e.RemoveClaim("first") // nothing refers to web's or acme's series: both dropped
	e.AddClaim(claim("second", 2, proj("web"), quota.Request{ResourceType: vcpu, Amount: 3}))
	e.UpsertGrant(grant("web", proj("web"), vcpu, quota.GrantBucket{Amount: 10}))
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 5}))
	e.Decide()
	if d, _ := e.Decision("second"); d.Outcome != quota.Granted {
		t.Fatalf("3 against the project's 10 and the organization's 5: %s %q", d.Outcome, d.Message)
	}
	if got := nums(t, e, org, vcpu, nil); got != (numbers{5, 3, 2}) {
		t.Errorf("organization bucket %+v, want 5/3/2", got)
	}
}

// FuzzHierarchyNeverOverAllocates drives projects, an organization and a
// group with random claims, releases, grants (amounts up to MaxInt64) and
// relabelling, and checks that after every decision each level's limited
// bucket holds no more than its limit unless a change made it so without a
// new grant, and that no sum wrapped.
func FuzzHierarchyNeverOverAllocates(f *testing.F) {
	f.Add(uint64(1), []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add(uint64(7), []byte{9, 9, 9, 1, 1, 1, 3, 3, 3})
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		e := hierarchy(t)
		projects := []string{"web", "api", "db"}
		e.SetConsumer(proj("db"), quota.ConsumerInfo{Parent: &org})
		amount := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return math.MaxInt64 - rng.Int64N(3)
			default:
				return rng.Int64N(20)
			}
		}
		live := map[string]quota.Claim{}
		delegatedGrants := map[string]quota.Grant{}
		orgGrants := map[string]quota.Grant{} // the budget's limit, by UID
		n := 0
		for _, op := range ops {
			n++
			uid := "c" + string(rune('a'+n%26)) + string(rune('a'+n/26%26))
			switch op % 7 {
			case 6:
				// A delegated grant: accepted only within the budget,
				// computed here exactly with big integers.
				d := grant("d"+string(rune('0'+rng.IntN(3))), proj(projects[rng.IntN(3)]), vcpu, quota.GrantBucket{Amount: amount()}, quota.GrantBucket{Amount: amount()})
				d.Namespace, d.Budget = "organization-acme", &org
				r := e.CheckBudget(d)
				if r.Left < 0 || r.Given < 0 || r.Limit < 0 || r.Left > r.Limit {
					t.Fatalf("budget numbers wrapped: %+v", r)
				}
				if r.OK {
					checkBudget(t, d, delegatedGrants, orgGrants)
					delegatedGrants[d.Name] = d
					e.UpsertGrant(d)
				}
			case 0, 1:
				c := claim(uid, n, proj(projects[rng.IntN(3)]), quota.Request{ResourceType: vcpu, Amount: 1 + rng.Int64N(8), Dims: nil})
				e.AddClaim(c)
				live[uid] = c
			case 2:
				for k := range live {
					e.RemoveClaim(k)
					delete(live, k)
					break
				}
			case 3:
				g := grant("org"+string(rune('0'+rng.IntN(2))), org, vcpu, quota.GrantBucket{Amount: amount()})
				orgGrants[g.UID] = g
				e.UpsertGrant(g)
			case 4:
				// A group grant raised, given another selector, or deleted.
				uid := "g" + string(rune('0'+rng.IntN(2)))
				switch rng.IntN(4) {
				case 0:
					e.RemoveGrant(uid)
				case 1:
					e.UpsertGrant(group(uid, amount(), "quota.miloapis.com/team=web"))
				default:
					e.UpsertGrant(group(uid, amount(), "quota.miloapis.com/team=data"))
				}
			case 5:
				team := []string{"data", "web"}[rng.IntN(2)]
				e.SetConsumer(proj(projects[rng.IntN(3)]), quota.ConsumerInfo{Parent: &org, Labels: map[string]string{"quota.miloapis.com/team": team}})
			}
			before := map[quota.BucketID]quota.BucketStatus{}
			for _, id := range e.BucketIDs() {
				before[id], _ = e.Bucket(id)
			}
			changed := e.Decide()
			checkLevels(t, e)
			checkWaiting(t, e)
			for _, id := range e.BucketIDs() {
				b, _ := e.Bucket(id)
				if b.Limit < 0 || b.Allocated < 0 {
					t.Fatalf("bucket %v wrapped: %+v", id, b)
				}
				// A decision never takes a bucket over its limit, nor
				// further over it.
				if len(changed) > 0 && b.OverLimit() && b.Allocated > before[id].Allocated {
					t.Fatalf("a decision took bucket %v over its limit: %+v (before %+v)", id, b, before[id])
				}
			}
		}
	})
}

// checkBudget fails when a delegated grant accepted by CheckBudget grows
// the sum of the budget's grants past the organization's limit (the sum of
// orgGrants), computed exactly. What one grant gives saturates at MaxInt64,
// as does the limit: the sum of the grants' (saturated) amounts must stay
// within it.
func checkBudget(t *testing.T, d quota.Grant, stored, orgGrants map[string]quota.Grant) {
	t.Helper()
	maxInt := big.NewInt(math.MaxInt64)
	exact := func(g quota.Grant) *big.Int {
		out := new(big.Int)
		for _, a := range g.Allowances {
			for _, b := range a.Buckets {
				if len(b.Dims) == 0 {
					out.Add(out, big.NewInt(b.Amount))
				}
			}
		}
		if out.Cmp(maxInt) > 0 {
			out.Set(maxInt)
		}
		return out
	}
	if old, ok := stored[d.Name]; ok && exact(d).Cmp(exact(old)) <= 0 {
		return // lowering is always allowed
	}
	sum := exact(d)
	for name, g := range stored {
		if name != d.Name {
			sum.Add(sum, exact(g))
		}
	}
	limit := new(big.Int)
	for _, g := range orgGrants {
		limit.Add(limit, exact(g))
	}
	if limit.Cmp(big.NewInt(math.MaxInt64)) > 0 {
		limit.SetInt64(math.MaxInt64)
	}
	if sum.Cmp(limit) > 0 {
		t.Fatalf("CheckBudget accepted %s: the budget's grants would give %s of the limit %s", d.Name, sum, limit)
	}
}

// checkLevels fails when a claim's levels differ from what its consumer's
// chain gives now (a change the engine did not follow), or a bucket's
// allocation differs from the granted requests of the claims that draw from
// its series.
func checkLevels(t *testing.T, e *Accounts) {
	t.Helper()
	for _, uid := range e.groups {
		g, _ := e.books.Grant(uid)
		want := map[quota.ConsumerID]struct{}{}
		for c := range e.info {
			if e.selects(g.Group, c) {
				want[c] = struct{}{}
			}
		}
		if !maps.Equal(want, e.members[uid]) {
			t.Fatalf("group grant %s: members index %v, its selector selects %v", uid, e.members[uid], want)
		}
	}
	for _, cs := range e.claims {
		for i, r := range cs.claim.Requests {
			want := e.computeLevels(cs.claim.Consumer, r.ResourceType)
			if !slices.Equal(want, cs.levels[i]) {
				t.Fatalf("claim %s draws from %d levels; its chain gives %d", cs.claim.UID, len(cs.levels[i]), len(want))
			}
		}
	}
	for _, id := range e.BucketIDs() {
		b, _ := e.Bucket(id)
		key := bookkeeping.Key{Consumer: id.Consumer, ResourceType: id.ResourceType}
		var sum quota.Total
		var n int32
		for _, cs := range e.claims {
			if cs.decision.Outcome != quota.Granted {
				continue
			}
			for i, r := range cs.claim.Requests {
				for _, s := range cs.levels[i] {
					if s.Key() == key && b.Dims.SubsetOf(r.Dims) {
						sum.Add(r.Amount)
						n++
					}
				}
			}
		}
		if sum.Value() != b.Allocated || n != b.Claims {
			t.Fatalf("bucket %v allocates %d for %d claims; the granted requests drawing from it add up to %d for %d", id, b.Allocated, b.Claims, sum.Value(), n)
		}
	}
}

// Room gained at a level several consumers share goes to their oldest
// waiting claims first, whichever consumer they belong to: waiting claims
// of web and api, interleaved in creation order, are granted in that order
// one raise of the organization's limit at a time (20 times, so that an
// order that merely depended on which project came first would show).
func TestSharedRoomGoesToTheOldestWaitingClaimAcrossConsumers(t *testing.T) {
	for range 20 {
		e := hierarchy(t)
		e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 0}))
		e.UpsertGrant(grant("web", proj("web"), vcpu, quota.GrantBucket{Amount: 10}))
		e.UpsertGrant(grant("api", proj("api"), vcpu, quota.GrantBucket{Amount: 10}))
		order := []string{"api-0", "web-1", "web-2", "api-3", "web-4", "api-5"}
		for i, uid := range order {
			p := proj(strings.SplitN(uid, "-", 2)[0])
			e.AddClaim(claim(uid, i, p, quota.Request{ResourceType: vcpu, Amount: 1}))
		}
		e.Decide()
		for limit := int64(1); limit <= int64(len(order)); limit++ {
			e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: limit}))
			changed := e.Decide()
			granted := ""
			for _, c := range changed {
				if c.Decision.Outcome == quota.Granted {
					granted += c.UID
				}
			}
			if want := order[limit-1]; granted != want {
				t.Fatalf("the organization's limit raised to %d granted %q, want %q (the oldest waiting claim of either project)", limit, granted, want)
			}
		}
	}
}

// TestAClaimOfAnUnknownProjectWaitsForItsOrganization: a Project the engine
// has no record of (applied after what is charged to it, or not delivered
// by its watch yet) cannot be placed under its Organization. Its claims are
// never decided against its own grant alone — which would let them pass the
// Organization's limit — but wait, and are decided under the Organization
// once the Project appears.
func TestAClaimOfAnUnknownProjectWaitsForItsOrganization(t *testing.T) {
	e := hierarchy(t)
	late := proj("late")
	e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 3}))
	e.UpsertGrant(grant("late", late, vcpu, quota.GrantBucket{Amount: 10}))
	for i, uid := range []string{"l1", "l2", "l3"} {
		e.AddClaim(claim(uid, i+1, late, quota.Request{ResourceType: vcpu, Amount: 2}))
	}
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.QuotaExceeded, quota.QuotaExceeded, quota.QuotaExceeded}, outcomes(e, "l1", "l2", "l3")); diff != "" {
		t.Fatalf("claims of an unknown project (-want +got):\n%s", diff)
	}
	d, _ := e.Decision("l1")
	if d.Requests[0].Reason != quota.ReasonConsumerNotKnown || !strings.Contains(d.Message, "Project late is not known to quota") || !strings.Contains(d.Message, "create Project late first") {
		t.Fatalf("the refusal names the cause: %+v", d)
	}
	if got := nums(t, e, late, vcpu, nil); got.Allocated != 0 {
		t.Fatalf("the unknown project's bucket holds %d", got.Allocated)
	}
	// The project appears under acme: its claims are decided under the
	// organization's limit of 3 — one fits.
	e.SetConsumer(late, quota.ConsumerInfo{Parent: &org})
	e.Decide()
	if diff := cmp.Diff([]quota.Outcome{quota.Granted, quota.QuotaExceeded, quota.QuotaExceeded}, outcomes(e, "l1", "l2", "l3")); diff != "" {
		t.Fatalf("once the project is known (-want +got):\n%s", diff)
	}
	if got := nums(t, e, org, vcpu, nil); got.Allocated != 2 {
		t.Errorf("organization allocated %d, want 2 (never past its limit of 3)", got.Allocated)
	}
	// A consumer at the top of the levels needs no record.
	e.UpsertRegistration(quota.Registration{Name: "orgs", Created: t0, ResourceType: "example.com/orgs", ConsumerType: orgType, BaseUnit: "unit",
		Levels: []quota.GroupKind{orgType}})
	other := quota.ConsumerID{APIGroup: orgType.Group, Kind: orgType.Kind, Name: "unseen"}
	e.UpsertGrant(grant("unseen", other, "example.com/orgs", quota.GrantBucket{Amount: 1}))
	e.AddClaim(claim("o1", 9, other, quota.Request{ResourceType: "example.com/orgs", Amount: 1}))
	e.Decide()
	if got := outcomes(e, "o1"); got[0] != quota.Granted {
		t.Errorf("an organization's own claim: %s", got[0])
	}
}

// checkWaiting holds what the indexes behind the decide loop promise: the
// waiting count and the consumers with waiting claims are those there are,
// and after a decision no waiting claim fits — room anywhere it draws from
// reached it (docs/scale.md §4).
func checkWaiting(t *testing.T, e *Accounts) {
	t.Helper()
	n := 0
	for c, q := range e.consumers {
		n += len(q.waiting)
		if _, ok := e.waiters[c]; ok != (len(q.waiting) > 0) {
			t.Fatalf("consumer %s has %d waiting claims, and is among the waiters: %v", c, len(q.waiting), ok)
		}
		for _, cs := range q.waiting {
			if d := e.evaluate(cs); d.Outcome == quota.Granted {
				t.Fatalf("claim %s of %s waits after a decision, and fits", cs.claim.UID, c)
			}
		}
	}
	if n != e.Waiting() || len(e.waiters) > len(e.consumers) {
		t.Fatalf("the waiting count says %d; %d claims wait", e.Waiting(), n)
	}
}
