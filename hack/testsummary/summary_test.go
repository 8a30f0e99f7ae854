package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// stream renders events as go test -json would.
func stream(t *testing.T, events ...event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func out(p, test, s string) event { return event{Action: "output", Package: p, Test: test, Output: s} }

func run(t *testing.T, input string, required ...string) (string, bool) {
	t.Helper()
	var b strings.Builder
	s := newSummary(&b)
	if err := s.read(strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	ok := s.report(required)
	return b.String(), ok
}

// TestAGreenRunCountsToolsAndTimings: passes, skips with their reasons, the
// tools used and the timed assertions are all in the summary.
func TestAGreenRunCountsToolsAndTimings(t *testing.T) {
	in := stream(t,
		event{Action: "run", Package: "p", Test: "TestKubectl"},
		out("p", "TestKubectl", "    a_test.go:3: uses-tool: kubectl /usr/bin/kubectl\n"),
		out("p", "TestKubectl", "    a_test.go:9: timed-assertion: start-up: took 2s bound 15s\n"),
		event{Action: "pass", Package: "p", Test: "TestKubectl", Elapsed: 2.5},
		event{Action: "run", Package: "p", Test: "TestLong"},
		out("p", "TestLong", "    a_test.go:5: runs for 3 minutes\n"),
		out("p", "TestLong", "--- SKIP: TestLong (0.00s)\n"),
		event{Action: "skip", Package: "p", Test: "TestLong"},
		event{Action: "pass", Package: "p", Elapsed: 1.5},
	)
	got, ok := run(t, in, "kubectl")
	if !ok {
		t.Errorf("a green run was reported red:\n%s", got)
	}
	for _, want := range []string{"ok\tp\t1.5s", "1 passed, 0 failed, 1 skipped", "skipped: p.TestLong: a_test.go:5: runs for 3 minutes",
		"tool kubectl: used by 1 tests", "timed: p.TestKubectl: start-up: took 2s bound 15s", "slow: p.TestKubectl 2.5s\nslow: p.TestLong 0s"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// TestAToolNoTestUsedFailsTheRun: a run that requires kubectl but in which
// no test used it (kubectl missing, every such test skipped) is red.
func TestAToolNoTestUsedFailsTheRun(t *testing.T) {
	in := stream(t,
		event{Action: "run", Package: "p", Test: "TestKubectl"},
		out("p", "TestKubectl", "    tools.go:70: kubectl is not on PATH: skipping\n"),
		event{Action: "skip", Package: "p", Test: "TestKubectl"},
		event{Action: "pass", Package: "p"},
	)
	got, ok := run(t, in, "kubectl", "chromium")
	if ok {
		t.Errorf("a run in which no test used kubectl was reported green:\n%s", got)
	}
	if !strings.Contains(got, "no test used kubectl") || !strings.Contains(got, "no test used chromium") {
		t.Errorf("the summary does not name the unused tools:\n%s", got)
	}
}

// TestFailuresAreShownWhole: a failed test's output, and the tests left
// running when a package failed (a timeout), are printed, and the run is red.
func TestFailuresAreShownWhole(t *testing.T) {
	in := stream(t,
		event{Action: "run", Package: "p", Test: "TestA"},
		out("p", "TestA", "    a_test.go:3: want 3, got 4\n"),
		event{Action: "fail", Package: "p", Test: "TestA"},
		event{Action: "run", Package: "q", Test: "TestHangs"},
		out("q", "TestHangs", "    q_test.go:8: waiting\n"),
		out("q", "", "panic: test timed out after 30m0s\n"),
		event{Action: "fail", Package: "q", Elapsed: 1800},
	)
	got, ok := run(t, in)
	if ok {
		t.Errorf("a run with failures was reported green:\n%s", got)
	}
	for _, want := range []string{"--- FAIL: p.TestA\n    a_test.go:3: want 3, got 4", "--- UNFINISHED: q.TestHangs\n    q_test.go:8: waiting",
		"panic: test timed out after 30m0s", "failed packages: q"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// TestABuildFailureIsRed: a package that does not compile fails the run
// even though no test event says so.
func TestABuildFailureIsRed(t *testing.T) {
	in := stream(t,
		event{Action: "build-output", ImportPath: "p [p.test]", Output: "a.go:1: syntax error\n"},
		event{Action: "build-fail", ImportPath: "p [p.test]"},
	) + "FAIL\tp [build failed]\n"
	got, ok := run(t, in)
	if ok || !strings.Contains(got, "a.go:1: syntax error") {
		t.Errorf("a build failure: want red with its output, got ok=%v:\n%s", ok, got)
	}
}
