package quota

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestThresholdLevel: a bucket rises to a level as soon as it reaches its
// threshold and falls only HysteresisPoints below it.
func TestThresholdLevel(t *testing.T) {
	th := Thresholds{Warning: 80, Critical: 95}
	cases := map[string]struct {
		pct  float64
		prev Level
		want Level
	}{
		"below":                         {pct: 50, prev: LevelBelow, want: LevelBelow},
		"reaches warning":               {pct: 80, prev: LevelBelow, want: LevelWarning},
		"reaches critical":              {pct: 95, prev: LevelWarning, want: LevelCritical},
		"critical holds within 5":       {pct: 91, prev: LevelCritical, want: LevelCritical},
		"critical falls to warning":     {pct: 89, prev: LevelCritical, want: LevelWarning},
		"warning holds within 5":        {pct: 76, prev: LevelWarning, want: LevelWarning},
		"warning falls below":           {pct: 74, prev: LevelWarning, want: LevelBelow},
		"a jump from below to critical": {pct: 100, prev: LevelBelow, want: LevelCritical},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ThresholdLevel(tc.pct, tc.prev, th); got != tc.want {
				t.Errorf("ThresholdLevel(%v, %d) = %d; want %d", tc.pct, tc.prev, got, tc.want)
			}
		})
	}
	if diff := cmp.Diff([]float64{0, 100, 50}, []float64{PercentUsed(0, 0), PercentUsed(1, 0), PercentUsed(5, 10)}); diff != "" {
		t.Errorf("percentUsed (-want +got):\n%s", diff)
	}
}
