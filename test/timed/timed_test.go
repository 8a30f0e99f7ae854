package timed

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps what Within says to it: its log lines,
// and each way of failing a test. A method it does not define is its nil
// testing.TB's, and panics: that fails the test too.
type recorder struct {
	testing.TB
	logs, failures []string
}

func (r *recorder) Helper()         {}
func (r *recorder) Log(args ...any) { r.logs = append(r.logs, fmt.Sprintln(args...)) }
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Error(args ...any) { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
}
func (r *recorder) Fail()           { r.fail("Fail()") }
func (r *recorder) FailNow()        { r.fail("FailNow()") }
func (r *recorder) fail(msg string) { r.failures = append(r.failures, msg) }
func (r *recorder) Failed() bool    { return len(r.failures) > 0 }

// line is the log line's format, as `.ci/run`'s summary reads it.
var line = regexp.MustCompile(`^timed-assertion: (.+): took (\S+) bound (\S+)$`)

// TestWithin: within the bound (equal included) Within passes; past it,
// by any margin, it fails once with a message that says what, how long,
// the bound and where the goal is benchmarked; either way it logs one
// parseable line.
func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		took, bound time.Duration
		fail        bool
	}{
		{10 * time.Millisecond, 5 * time.Second, false},
		{5 * time.Second, 5 * time.Second, false},
		{5*time.Second + time.Nanosecond, 5 * time.Second, true},
		{5*time.Second + time.Millisecond, 5 * time.Second, true},
		{time.Minute, 5 * time.Second, true},
	} {
		r := &recorder{}
		within := Within(r, "the staff view loaded", tc.took, tc.bound)
		if within == tc.fail || r.Failed() != tc.fail {
			t.Errorf("took %s, bound %s: returned %v, failures %q; want failed=%v", tc.took, tc.bound, within, r.failures, tc.fail)
		}
		if len(r.failures) > 1 {
			t.Errorf("took %s, bound %s: failed %d times, want at most once", tc.took, tc.bound, len(r.failures))
		}
		if len(r.logs) != 1 {
			t.Fatalf("took %s, bound %s: logged %q, want one line", tc.took, tc.bound, r.logs)
		}
		m := line.FindStringSubmatch(r.logs[0])
		if m == nil || m[1] != "the staff view loaded" {
			t.Fatalf("log line %q does not match %s", r.logs[0], line)
		}
		took, err1 := time.ParseDuration(m[2])
		bound, err2 := time.ParseDuration(m[3])
		if err1 != nil || err2 != nil || bound != tc.bound || took.Round(time.Microsecond) != tc.took.Round(time.Microsecond) {
			t.Errorf("log line %q reads back as took %s (%v), bound %s (%v); want %s, %s", r.logs[0], took, err1, bound, err2, tc.took, tc.bound)
		}
		for _, msg := range r.failures {
			for _, want := range []string{"the staff view loaded", tc.bound.String(), "5 times the median", ".ci/run", "docs/benchmarks.md"} {
				if !strings.Contains(msg, want) {
					t.Errorf("failure %q does not say %q", msg, want)
				}
			}
		}
	}
}
