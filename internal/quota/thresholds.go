package quota

// Thresholds tell a tenant that a bucket is filling up: a level rises as soon
// as a bucket's use reaches its registration's warning or critical
// percentage, and falls only HysteresisPoints below it, so a bucket hovering
// at a threshold does not flap.

// Default thresholds, in percent of a bucket's limit: where cloud consoles
// notify.
const (
	DefaultWarningPercent  = 80
	DefaultCriticalPercent = 95
	// HysteresisPoints: a bucket that crossed a threshold upwards falls back
	// below it only this many percentage points under it.
	HysteresisPoints = 5
)

// Level is how close a bucket is to its limit, in increasing order.
type Level int

const (
	LevelBelow Level = iota
	LevelWarning
	LevelCritical
)

// Thresholds are a registration's percentages, defaults applied.
type Thresholds struct{ Warning, Critical int32 }

// PercentUsed is allocated as a percentage of limit; a bucket without a
// limit is 0 % used when nothing is allocated, 100 % otherwise.
func PercentUsed(allocated, limit int64) float64 {
	if limit <= 0 {
		if allocated > 0 {
			return 100
		}
		return 0
	}
	return float64(allocated) * 100 / float64(limit)
}

// ThresholdLevel is the level a bucket at pct is at, given the level it was
// at: it rises as soon as pct reaches a threshold, and falls only once pct is
// HysteresisPoints under the threshold it had reached.
func ThresholdLevel(pct float64, prev Level, th Thresholds) Level {
	level := LevelBelow
	if pct >= float64(th.Warning) {
		level = LevelWarning
	}
	if pct >= float64(th.Critical) {
		level = LevelCritical
	}
	if prev == LevelCritical && level < LevelCritical && pct >= float64(th.Critical-HysteresisPoints) {
		level = LevelCritical
	}
	if prev >= LevelWarning && level < LevelWarning && pct >= float64(th.Warning-HysteresisPoints) {
		level = LevelWarning
	}
	return level
}
