package quota

import (
	"fmt"
	"testing"
)

// BenchmarkDecide measures the pure decision path: add a claim, decide it,
// release it, against a consumer with an overall and a dimensioned bucket.
func BenchmarkDecide(b *testing.B) {
	e := NewEngine()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	e.UpsertGrant(grant("g", org, "compute.io/instances", GrantBucket{Amount: 1 << 40}, GrantBucket{Amount: 1 << 40, Dims: dims("location", "dfw")}))
	claims := make([]Claim, 1024)
	for i := range claims {
		claims[i] = claim(fmt.Sprintf("c%d", i), i, org, Request{"compute.io/instances", 1, dims("location", "dfw")})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := claims[i%len(claims)]
		e.AddClaim(c)
		if d, _ := e.DecideOne(c.UID); d.Outcome != Granted {
			b.Fatal(d.Message)
		}
		e.RemoveClaim(c.UID)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkDecideDenied measures a decision that is refused (the bucket is full).
func BenchmarkDecideDenied(b *testing.B) {
	e := NewEngine()
	e.UpsertRegistration(reg("inst", "compute.io/instances"))
	e.UpsertGrant(grant("g", org, "compute.io/instances", GrantBucket{Amount: 0}))
	c := claim("c", 0, org, Request{"compute.io/instances", 1, nil})
	e.AddClaim(c)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, _ := e.DecideOne(c.UID); d.Outcome != QuotaExceeded {
			b.Fatal(d.Outcome)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
