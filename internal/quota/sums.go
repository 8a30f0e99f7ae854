package quota

import (
	"math"
	"math/bits"
)

// Amounts are int64, and sums of them must never wrap: two grants of
// MaxInt64 would otherwise make a limit of -2 and deny every claim. Running
// totals (a bucket's limit and allocation) are kept exactly and shown clamped
// to [0, MaxInt64]; a single sum or difference saturates.

// Total is an exact running sum of int64 amounts, two's complement over 128
// bits: no number of terms a process can hold overflows it, so subtracting a
// term added earlier restores it exactly, whatever it passed through.
type Total struct {
	hi int64
	lo uint64
}

// Add counts v in the total.
func (t *Total) Add(v int64) {
	var carry uint64
	t.lo, carry = bits.Add64(t.lo, uint64(v), 0)
	t.hi += int64(carry) + v>>63 // v>>63 is v's upper 64 bits: -1 when negative
}

// Sub takes v, counted before, out of the total.
func (t *Total) Sub(v int64) {
	var borrow uint64
	t.lo, borrow = bits.Sub64(t.lo, uint64(v), 0)
	t.hi -= int64(borrow) + v>>63
}

// Value is the total clamped to [0, MaxInt64].
func (t Total) Value() int64 {
	switch {
	case t.hi < 0:
		return 0
	case t.hi > 0 || t.lo > math.MaxInt64:
		return math.MaxInt64
	}
	return int64(t.lo)
}

// AddSat is a+b, saturated at MaxInt64 and MinInt64 instead of wrapping.
func AddSat(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// Room is limit minus allocated, never below 0 and never wrapped.
func Room(limit, allocated int64) int64 {
	if allocated >= limit {
		return 0
	}
	d := uint64(limit) - uint64(allocated) // exact: 0 < limit-allocated < 2^64
	if d > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(d)
}
