package accounting

import (
	"fmt"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// benchEngine is a consumer with an overall and a dimensioned bucket, and
// 1,024 claims of one unit against both.
func benchEngine() (*Accounts, []quota.Claim) {
	e := New()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	e.UpsertGrant(grant("g", org, "compute.io/instances", quota.GrantBucket{Amount: 1 << 40}, quota.GrantBucket{Amount: 1 << 40, Dims: dims("location", "dfw")}))
	claims := make([]quota.Claim, 1024)
	for i := range claims {
		claims[i] = claim(fmt.Sprintf("c%d", i), i, org, quota.Request{ResourceType: "compute.io/instances", Amount: 1, Dims: dims("location", "dfw")})
	}
	return e, claims
}

// BenchmarkDecide measures the decision admission makes for one create, as
// the admission path calls it (engine.term.admit): add the claim, decide it
// with DecideTogether (granted against an overall and a dimensioned bucket),
// then release it.
func BenchmarkDecide(b *testing.B) {
	e, claims := benchEngine()
	uids := make([]string, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := claims[i%len(claims)]
		e.AddClaim(c)
		uids[0] = c.UID
		if _, ok := e.DecideTogether(uids); !ok {
			b.Fatal("denied")
		}
		e.RemoveClaim(c.UID)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkDecideWaiting measures the engine's own path for claims created
// through the API (engine.term.decideOnce): 64 claims arrive, one
// DecideUpTo decides them all in creation order and reports the changes,
// then they are released. One op is one decision.
func BenchmarkDecideWaiting(b *testing.B) {
	e, claims := benchEngine()
	const batch = 64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		n := min(batch, b.N-i)
		for k := range n {
			e.AddClaim(claims[(i+k)%len(claims)])
		}
		changed, _ := e.DecideUpTo(2000)
		if len(changed) != n {
			b.Fatalf("decided %d of %d", len(changed), n)
		}
		for k := range n {
			e.RemoveClaim(claims[(i+k)%len(claims)].UID)
		}
		_, _, _ = e.TakeChanged()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkDecideDenied measures admission's decision when it is refused
// (the bucket is full).
func BenchmarkDecideDenied(b *testing.B) {
	e := New()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	e.UpsertGrant(grant("g", org, "compute.io/instances", quota.GrantBucket{Amount: 0}))
	c := claim("c", 0, org, quota.Request{ResourceType: "compute.io/instances", Amount: 1, Dims: nil})
	e.AddClaim(c)
	b.ReportAllocs()
	b.ResetTimer()
	uids := []string{c.UID}
	for i := 0; i < b.N; i++ {
		if d, ok := e.DecideTogether(uids); ok || d[c.UID].Outcome != quota.QuotaExceeded {
			b.Fatal(d[c.UID].Outcome)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkDecideLevels measures admission's decision (as BenchmarkDecide)
// for claims of Projects: with one level (the project's grant only), and
// with three (the project, its organization and a label-selected group,
// each with a grant). Run both in one invocation and compare decisions/s.
func BenchmarkDecideLevels(b *testing.B) {
	for _, levels := range []int{1, 3} {
		b.Run(fmt.Sprintf("levels=%d", levels), func(b *testing.B) {
			e := New()
			r := quota.Registration{Name: "vcpu", Created: t0, ResourceType: vcpu, ConsumerType: project, BaseUnit: "core", Claiming: []quota.GroupKind{{Group: "", Kind: "ConfigMap"}}}
			if levels == 3 {
				r.Levels = []quota.GroupKind{orgType}
			}
			e.UpsertRegistration(r)
			const projects = 64
			for i := range projects {
				p := proj(fmt.Sprintf("p%d", i))
				e.SetConsumer(p, quota.ConsumerInfo{Parent: &org, Labels: map[string]string{"quota.miloapis.com/team": "data"}})
				e.UpsertGrant(grant("g"+p.Name, p, vcpu, quota.GrantBucket{Amount: 1 << 40}))
			}
			if levels == 3 {
				e.SetConsumer(org, quota.ConsumerInfo{})
				e.UpsertGrant(grant("org", org, vcpu, quota.GrantBucket{Amount: 1 << 50}))
				e.UpsertGrant(group("team", 1<<50, "quota.miloapis.com/team=data"))
			}
			claims := make([]quota.Claim, 1024)
			for i := range claims {
				claims[i] = claim(fmt.Sprintf("c%d", i), i, proj(fmt.Sprintf("p%d", i%projects)), quota.Request{ResourceType: vcpu, Amount: 1, Dims: nil})
			}
			uids := make([]string, 1)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := claims[i%len(claims)]
				e.AddClaim(c)
				uids[0] = c.UID
				if d, ok := e.DecideTogether(uids); !ok {
					b.Fatal(d[c.UID].Message)
				}
				e.RemoveClaim(c.UID)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
