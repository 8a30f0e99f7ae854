package timed

import (
	"testing"
	"time"
)

// Within logs "timed-assertion: <what>: took <took> bound <bound>" and fails
// t when took is more than bound; it reports whether took was within it.
// bound must be at least 5 times the median of took under `.ci/run`'s load
// (see the package comment).
func Within(t testing.TB, what string, took, bound time.Duration) bool {
	t.Helper()
	shown := took.Round(time.Microsecond)
	t.Logf("timed-assertion: %s: took %s bound %s", what, shown, bound)
	if took <= bound {
		return true
	}
	t.Errorf("%s took %s, more than its bound of %s (%.1f times the bound). "+
		"The bound is 5 times the median this measurement has under .ci/run's load, so this is not noise: "+
		"something became much slower, or hangs. The speed goal is benchmarked, not tested: "+
		"docs/benchmarks.md, \"Timed assertions in the suite\".", what, shown, bound, float64(took)/float64(bound))
	return false
}
