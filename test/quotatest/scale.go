package quotatest

import "os"

// FullScaleEnv names the environment variable that runs the long tests at
// the sizes docs/benchmarks.md quotes (1,000 organizations at once, a
// 3-minute soak, 10,000 buckets behind the staff view) instead of the
// smaller sizes `.ci/run` uses. The smaller sizes cross the same
// boundaries — a client's rate limit, a list's page, a leader's failover —
// in less time; docs/testing.md, "Cost of the suite, by change", says what
// each still proves.
const FullScaleEnv = "QUOTAPLANE_FULL_SCALE"

// FullScale reports whether QUOTAPLANE_FULL_SCALE is set to a non-empty
// value other than "0" or "false".
func FullScale() bool {
	switch os.Getenv(FullScaleEnv) {
	case "", "0", "false":
		return false
	}
	return true
}

// Scale is full when FullScale, else small: a long test's size.
func Scale[T any](small, full T) T {
	if FullScale() {
		return full
	}
	return small
}
