package quota

import (
	"math"
	"testing"
)

const maxAmount = math.MaxInt64

func TestSumHelpers(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  int64
		want int64
	}{
		{"addSat small", AddSat(2, 3), 5},
		{"addSat up to MaxInt64", AddSat(maxAmount-1, 1), maxAmount},
		{"addSat past MaxInt64", AddSat(maxAmount, maxAmount), maxAmount},
		{"addSat past MinInt64", AddSat(math.MinInt64, -1), math.MinInt64},
		{"addSat negative", AddSat(5, -7), -2},
		{"room", Room(10, 3), 7},
		{"room over the limit", Room(3, 10), 0},
		{"room at MaxInt64", Room(maxAmount, 0), maxAmount},
		{"room from a negative allocation", Room(maxAmount, -5), maxAmount},
		{"total of three MaxInt64", sum(maxAmount, maxAmount, maxAmount), maxAmount},
		{"total back below MaxInt64", sum(maxAmount, maxAmount, 7, -maxAmount, -maxAmount), 7},
		{"total below 0", sum(3, -5), 0},
		{"total of MinInt64 terms", sum(math.MinInt64, math.MinInt64, maxAmount), 0},
		{"total back from below MinInt64", sum(math.MinInt64, math.MinInt64, -math.MinInt64-1, -math.MinInt64-1, 2, 9), 9},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	var tot Total
	tot.Add(maxAmount)
	tot.Add(maxAmount)
	tot.Sub(maxAmount)
	tot.Sub(maxAmount - 4)
	if got := tot.Value(); got != 4 {
		t.Errorf("add and sub: got %d, want 4", got)
	}
}

func sum(vs ...int64) int64 {
	var t Total
	for _, v := range vs {
		t.Add(v)
	}
	return t.Value()
}
