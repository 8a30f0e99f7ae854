package quota

import (
	"math"
	"reflect"
	"testing"
)

func TestGrowth(t *testing.T) {
	acme := ConsumerID{Kind: "Project", Name: "acme"}
	beta := ConsumerID{Kind: "Project", Name: "beta"}
	claim := func(c ConsumerID, reqs ...Request) Claim { return Claim{Consumer: c, Requests: reqs} }
	cpu := func(n int64) Request { return Request{ResourceType: "vcpu", Amount: n} }
	mem := func(n int64) Request { return Request{ResourceType: "memory", Amount: n} }
	cases := []struct {
		name string
		old  []Claim
		new  Claim
		want []Request
	}{
		{"grows", []Claim{claim(acme, cpu(2), mem(4))}, claim(acme, cpu(8), mem(4)), []Request{cpu(6)}},
		{"shrinks", []Claim{claim(acme, cpu(8))}, claim(acme, cpu(2)), nil},
		{"unchanged", []Claim{claim(acme, cpu(2))}, claim(acme, cpu(2)), nil},
		{"new type", []Claim{claim(acme, cpu(2))}, claim(acme, cpu(2), mem(1)), []Request{mem(1)}},
		{"other consumer takes it all", []Claim{claim(acme, cpu(8))}, claim(beta, cpu(2)), []Request{cpu(2)}},
		{"nothing held before", nil, claim(acme, cpu(3)), []Request{cpu(3)}},
		{"two old claims", []Claim{claim(acme, cpu(2)), claim(acme, cpu(3))}, claim(acme, cpu(6)), []Request{cpu(1)}},
		{"saturated holding", []Claim{claim(acme, cpu(math.MaxInt64)), claim(acme, cpu(math.MaxInt64))}, claim(acme, cpu(math.MaxInt64)), nil},
		{"dimensions are cells", []Claim{claim(acme, Request{ResourceType: "vcpu", Amount: 4, Dims: Dimensions{{"zone", "a"}}})},
			claim(acme, Request{ResourceType: "vcpu", Amount: 4, Dims: Dimensions{{"zone", "b"}}}),
			[]Request{{ResourceType: "vcpu", Amount: 4, Dims: Dimensions{{"zone", "b"}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Growth(tc.old, tc.new); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Growth = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSameHolding(t *testing.T) {
	acme := ConsumerID{Kind: "Project", Name: "acme"}
	a := []Claim{{Consumer: acme, Requests: []Request{{ResourceType: "vcpu", Amount: 2}, {ResourceType: "memory", Amount: 4}}}}
	b := []Claim{{Consumer: acme, Requests: []Request{{ResourceType: "memory", Amount: 4}, {ResourceType: "vcpu", Amount: 2}}}}
	if !SameHolding(a, b) {
		t.Fatal("the same amounts in another order hold the same")
	}
	b[0].Requests[0].Amount = 5
	if SameHolding(a, b) {
		t.Fatal("different amounts reported as the same holding")
	}
	if SameHolding(a, nil) || !SameHolding(nil, nil) {
		t.Fatal("an empty holding compared wrongly")
	}
}

// FuzzGrowth: replacing old by new never needs more than new asks, and
// what old hold plus the growth covers every cell of new.
func FuzzGrowth(f *testing.F) {
	f.Add(int64(2), int64(8), int64(3))
	f.Add(int64(math.MaxInt64), int64(1), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, a, b, n int64) {
		if a <= 0 || b <= 0 || n <= 0 {
			return
		}
		acme := ConsumerID{Kind: "Project", Name: "acme"}
		old := []Claim{{Consumer: acme, Requests: []Request{{ResourceType: "vcpu", Amount: a}}}, {Consumer: acme, Requests: []Request{{ResourceType: "vcpu", Amount: b}}}}
		nc := Claim{Consumer: acme, Requests: []Request{{ResourceType: "vcpu", Amount: n}}}
		g := Growth(old, nc)
		held := Holding(old...)[Cell{acme, "vcpu", ""}]
		var grown int64
		for _, r := range g {
			if r.Amount <= 0 || r.Amount > n {
				t.Fatalf("growth %d for a request of %d", r.Amount, n)
			}
			grown += r.Amount
		}
		if AddSat(held, grown) < n {
			t.Fatalf("held %d + growth %d does not cover %d", held, grown, n)
		}
	})
}
