package accounting

import (
	"fmt"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/quota"
)

var walkRegistration = quota.Registration{Name: "vcpu", Created: t0, ResourceType: vcpu, ConsumerType: project, BaseUnit: "core",
	Claiming: []quota.GroupKind{{Group: "", Kind: "ConfigMap"}}, Levels: []quota.GroupKind{orgType}}

// walkWorld is n organizations of two projects each, every level granted,
// each project holding two granted claims; one organization (the last) is
// full, and one claim waits there.
func walkWorld(t *testing.T, n int) *Accounts {
	t.Helper()
	e := New()
	e.UpsertRegistration(walkRegistration)
	// A group of the projects labelled team=data: org-1's two.
	e.UpsertGrant(group("data", 100, "quota.miloapis.com/team=data"))
	seq := 0
	for i := range n {
		o := quota.ConsumerID{APIGroup: orgType.Group, Kind: orgType.Kind, Name: fmt.Sprintf("org-%d", i)}
		e.SetConsumer(o, quota.ConsumerInfo{})
		limit := int64(100)
		if i == n-1 {
			limit = 4 // full: its four claims take it all
		}
		e.UpsertGrant(grant(o.Name, o, vcpu, quota.GrantBucket{Amount: limit}))
		for p := range 2 {
			pid := proj(fmt.Sprintf("org-%d-p%d", i, p))
			var team map[string]string
			if i == 1 {
				team = map[string]string{"quota.miloapis.com/team": "data"}
			}
			e.SetConsumer(pid, quota.ConsumerInfo{Parent: &o, Labels: team})
			e.UpsertGrant(grant(pid.Name, pid, vcpu, quota.GrantBucket{Amount: 10}))
			for c := range 2 {
				seq++
				e.AddClaim(claim(fmt.Sprintf("%s-c%d", pid.Name, c), seq, pid, quota.Request{ResourceType: vcpu, Amount: 1}))
			}
		}
	}
	e.Decide()
	seq++
	full := proj(fmt.Sprintf("org-%d-p0", n-1))
	e.AddClaim(claim("waiting", seq, full, quota.Request{ResourceType: vcpu, Amount: 1}))
	e.Decide()
	if d, _ := e.Decision("waiting"); d.Outcome != quota.QuotaExceeded {
		t.Fatalf("the claim in the full organization: %s", d.Outcome)
	}
	if e.Waiting() != 1 {
		t.Fatalf("%d claims waiting, want 1", e.Waiting())
	}
	return e
}

// TestNothingUnderTheLockWalksEveryConsumer: each operation the engine
// runs under its lock — an idle decision round, a release and its round, a
// Project created and a create decided, a grant raised, a Project's parent
// changed, the waiting count — looks at the same number of consumers and
// claims at 1,000 organizations as at 10,000: its own subtree, never every
// consumer (docs/scale.md §4). Room freed in one organization does not
// reach the claim waiting in another; room freed in the full one does.
func TestNothingUnderTheLockWalksEveryConsumer(t *testing.T) {
	ops := []struct {
		name string
		do   func(e *Accounts, n int)
	}{
		{"idle round", func(e *Accounts, n int) { e.Decide() }},
		{"waiting count", func(e *Accounts, n int) { _ = e.Waiting() }},
		{"release and round", func(e *Accounts, n int) {
			e.RemoveClaim("org-7-p1-c0")
			e.Decide()
		}},
		{"project created, then a create decided", func(e *Accounts, n int) {
			o := quota.ConsumerID{APIGroup: orgType.Group, Kind: orgType.Kind, Name: "org-3"}
			p := proj("org-3-new")
			e.SetConsumer(p, quota.ConsumerInfo{Parent: &o})
			e.AddClaim(claim("new-c", 1_000_000, p, quota.Request{ResourceType: vcpu, Amount: 1}))
			if _, ok := e.DecideTogether([]string{"new-c"}); !ok {
				t.Fatalf("the new project's create was refused")
			}
		}},
		{"grant raised", func(e *Accounts, n int) {
			o := quota.ConsumerID{APIGroup: orgType.Group, Kind: orgType.Kind, Name: "org-5"}
			e.UpsertGrant(grant(o.Name, o, vcpu, quota.GrantBucket{Amount: 200}))
			e.Decide()
		}},
		{"registration seen again", func(e *Accounts, n int) {
			e.UpsertRegistration(walkRegistration)
			e.Decide()
		}},
		{"group grant raised", func(e *Accounts, n int) {
			e.UpsertGrant(group("data", 200, "quota.miloapis.com/team=data"))
			e.Decide()
			if got := e.GroupMembers(quota.GroupID("milo-system", "data")); len(got) != 2 {
				t.Fatalf("the group selects %v; want org-1's two projects", got)
			}
		}},
		{"project moved", func(e *Accounts, n int) {
			o := quota.ConsumerID{APIGroup: orgType.Group, Kind: orgType.Kind, Name: "org-9"}
			e.SetConsumer(proj("org-8-p0"), quota.ConsumerInfo{Parent: &o})
			e.Decide()
		}},
		{"room in the full organization", func(e *Accounts, n int) {
			e.RemoveClaim(fmt.Sprintf("org-%d-p1-c0", n-1))
			e.Decide()
			if d, _ := e.Decision("waiting"); d.Outcome != quota.Granted {
				t.Fatalf("room in its organization did not reach the waiting claim: %s", d.Outcome)
			}
		}},
	}
	visits := map[int][]uint64{}
	fastest := map[int][2]time.Duration{}
	for _, n := range []int{1000, 10000} {
		e := walkWorld(t, n)
		// Timed as well, the fastest of five (the machine is shared): an
		// uncounted walk of 10,000 organizations is ten times one of 1,000.
		var idle, created time.Duration = time.Hour, time.Hour
		o := quota.ConsumerID{APIGroup: orgType.Group, Kind: orgType.Kind, Name: "org-2"}
		for r := range 5 {
			start := time.Now()
			e.Decide()
			idle = min(idle, time.Since(start))
			start = time.Now()
			e.SetConsumer(proj(fmt.Sprintf("org-2-timed%d", r)), quota.ConsumerInfo{Parent: &o})
			e.Decide()
			created = min(created, time.Since(start))
		}
		fastest[n] = [2]time.Duration{idle, created}
		for _, op := range ops {
			before := e.visits
			op.do(e, n)
			visits[n] = append(visits[n], e.visits-before)
		}
		if d, _ := e.Decision("waiting"); d.Outcome != quota.Granted {
			t.Fatalf("at %d organizations the waiting claim ended %s", n, d.Outcome)
		}
	}
	for i, what := range []string{"an idle round", "a project created and a round"} {
		small, large := fastest[1000][i], fastest[10000][i]
		t.Logf("%s: %s with 1,000 organizations, %s with 10,000 (fastest of five)", what, small, large)
		if large > 4*small+200*time.Microsecond {
			t.Errorf("%s takes %s with 10,000 organizations against %s with 1,000: it grows with the consumers", what, large, small)
		}
	}
	for i, op := range ops {
		small, large := visits[1000][i], visits[10000][i]
		t.Logf("%s: %d consumers and claims looked at with 1,000 organizations, %d with 10,000", op.name, small, large)
		if large != small || large > 20 {
			t.Errorf("%s looks at %d with 1,000 organizations and %d with 10,000: it grows with the consumers", op.name, small, large)
		}
	}
}
