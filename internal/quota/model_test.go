package quota

import (
	"math"
	"testing"
)

// TestUsedPercent: rounded down, above 100 when over, none without a limit,
// and no overflow at the extremes.
func TestUsedPercent(t *testing.T) {
	for _, tc := range []struct {
		limit, allocated int64
		unlimited        bool
		want             int32
		ok               bool
	}{
		{10, 7, false, 70, true},
		{100, 29, false, 29, true},
		{3, 1, false, 33, true},
		{10, 0, false, 0, true},
		{10, 25, false, 250, true},
		{0, 0, false, 0, false},
		{0, 5, false, 0, false},
		{10, 5, true, 0, false},
		{math.MaxInt64, math.MaxInt64, false, 100, true},
		{1, math.MaxInt64, false, math.MaxInt32, true},
	} {
		got, ok := BucketStatus{Limit: tc.limit, Allocated: tc.allocated, Unlimited: tc.unlimited}.UsedPercent()
		if got != tc.want || ok != tc.ok {
			t.Errorf("%d of %d (unlimited %v): %d%% %v, want %d%% %v", tc.allocated, tc.limit, tc.unlimited, got, ok, tc.want, tc.ok)
		}
	}
}
