package quota

import (
	"slices"
	"strings"
)

// GrantedDecision is the decision of a claim granted in full: each request
// allocated from its consumer's overall bucket. It is how a claim that
// replaces another (an object resized) is written: its growth was decided
// before, its shrink needs no room.
func GrantedDecision(c Claim) Decision { return grantedDecision(c) }

// Cell is one amount a claim holds: a consumer's resource type with
// dimensions.
type Cell struct {
	Consumer     ConsumerID
	ResourceType string
	Dims         string // Dimensions.Key()
}

// Holding sums what claims hold, by cell. Sums saturate like buckets' sums.
func Holding(claims ...Claim) map[Cell]int64 {
	out := map[Cell]int64{}
	for _, c := range claims {
		for _, r := range c.Requests {
			k := Cell{c.Consumer, r.ResourceType, r.Dims.Key()}
			out[k] = AddSat(out[k], r.Amount)
		}
	}
	return out
}

// Growth is what replacing the claims old by the claim new needs beyond what
// old hold: for each of new's requests, the amount above what old hold in the
// same cell. A resize up grows, a resize down or a change of nothing does
// not; a new consumer grows by everything new asks of it. The result keeps
// new's order and omits cells that do not grow. It is what must fit for the
// replacement to be granted; what shrinks is released only once the
// replacement is stored.
func Growth(old []Claim, new Claim) []Request {
	held := Holding(old...)
	var out []Request
	for _, r := range new.Requests {
		have := held[Cell{new.Consumer, r.ResourceType, r.Dims.Key()}]
		if r.Amount > have {
			// Both are in [0, MaxInt64], so the difference cannot wrap.
			out = append(out, Request{ResourceType: r.ResourceType, Amount: r.Amount - have, Dims: r.Dims})
		}
	}
	return out
}

// SameHolding reports whether two sets of claims hold exactly the same
// amounts in the same cells: replacing one by the other changes nothing.
func SameHolding(a, b []Claim) bool {
	x, y := Holding(a...), Holding(b...)
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if w, ok := y[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Cells lists a holding's cells in a stable order, for messages.
func Cells(h map[Cell]int64) []Cell {
	out := make([]Cell, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Cell) int {
		switch {
		case a.Consumer.String() != b.Consumer.String():
			return strings.Compare(a.Consumer.String(), b.Consumer.String())
		case a.ResourceType != b.ResourceType:
			return strings.Compare(a.ResourceType, b.ResourceType)
		}
		return strings.Compare(a.Dims, b.Dims)
	})
	return out
}
