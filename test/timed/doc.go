// Package timed is the suite's one way to fail a test because something it
// measured took too long.
//
// Speed goals live in benchmarks (docs/benchmarks.md), not in tests that run
// in CI. A test may still refuse a time that says something is broken — a
// page that never becomes usable, a release that waits for a resync instead
// of happening at once — but only through Within, and only with a bound at
// least 5 times the median that measurement has under `.ci/run`'s own load
// (go test -p 3 ./... on 2 cores: three packages at a time), so that a loaded
// machine never fails the suite.
//
// Within's contract:
//
//   - Every call logs, with t.Logf, exactly one line
//     "timed-assertion: <what>: took <took> bound <bound>", whether it passes
//     or fails. The durations are written as time.Duration prints them, so
//     time.ParseDuration reads them back; <what> should not itself contain
//     ": took ". `.ci/run`'s logs give, from these lines, the medians under CI
//     load that docs/benchmarks.md lists.
//   - It fails the test (t.Errorf: the test goes on) when, and only when,
//     took is more than bound. The message names what was measured, the time,
//     the bound, that the bound is 5 times the median under CI load, and that
//     the speed goal is benchmarked in docs/benchmarks.md.
//   - It returns whether took was within the bound.
//
// The caller's part: every call site has a comment giving the bound, the
// median it was measured at and "5x the CI-load median (docs/benchmarks.md)",
// and is listed in docs/benchmarks.md, "Timed assertions in the suite". A
// wait that polls for a condition until a deadline is a correctness check
// with a timeout, not a timed assertion, unless its deadline is meant as a
// speed goal — then the wait gets a longer deadline and the time goes
// through Within.
//
// The package imports only testing, time and fmt, so any test may use it.
package timed
