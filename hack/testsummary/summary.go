package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

// key names a test within its package; Test is empty for the package's own
// output.
type key struct{ pkg, test string }

// summary accumulates a run's results while streaming packages' results and
// failures to out.
type summary struct {
	out io.Writer
	// running holds the output of each test (and package) not finished yet.
	running                 map[key][]string
	passed, failed, skipped int
	skips                   []string
	failedPackages          []string
	buildFailed             bool
	// tools counts, per tool, the tests that logged using it.
	tools map[string]int
	timed []string
	// slow are the finished top-level tests with their durations, for the
	// slowest few (what the suite's budget is spent on).
	slow []slowTest
}

type slowTest struct {
	name    string
	elapsed float64
}

// slowest is how many of the longest top-level tests the summary lists.
const slowest = 15

func newSummary(out io.Writer) *summary {
	return &summary{out: out, running: map[key][]string{}, tools: map[string]int{}}
}

// read consumes the event stream; lines that are not events (the go
// command's own messages) are passed through.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(s.out, string(line))
			continue
		}
		s.handle(e)
	}
	return sc.Err()
}

func (s *summary) handle(e event) {
	k := key{e.Package, e.Test}
	switch e.Action {
	case "output":
		s.running[k] = append(s.running[k], e.Output)
	case "build-output":
		fmt.Fprint(s.out, e.Output)
	case "build-fail":
		s.buildFailed = true
		fmt.Fprintf(s.out, "FAIL\t%s [build failed]\n", e.ImportPath)
	case "pass", "fail", "skip":
		if e.Test == "" {
			s.packageDone(e)
			return
		}
		s.testDone(k, e.Action)
		if !strings.Contains(e.Test, "/") {
			s.slow = append(s.slow, slowTest{k.pkg + "." + k.test, e.Elapsed})
		}
	}
}

func (s *summary) testDone(k key, action string) {
	lines := s.running[k]
	delete(s.running, k)
	name := k.pkg + "." + k.test
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if i := strings.Index(t, "uses-tool: "); i >= 0 {
			if f := strings.Fields(t[i+len("uses-tool: "):]); len(f) > 0 {
				s.tools[f[0]]++
			}
		}
		if i := strings.Index(t, "timed-assertion: "); i >= 0 {
			s.timed = append(s.timed, name+": "+t[i+len("timed-assertion: "):])
		}
	}
	switch action {
	case "pass":
		s.passed++
	case "skip":
		s.skipped++
		s.skips = append(s.skips, name+": "+reason(lines))
	case "fail":
		s.failed++
		fmt.Fprintf(s.out, "--- FAIL: %s\n%s", name, strings.Join(lines, ""))
	}
}

func (s *summary) packageDone(e event) {
	k := key{e.Package, ""}
	lines := s.running[k]
	delete(s.running, k)
	elapsed := time.Duration(e.Elapsed * float64(time.Second)).Round(100 * time.Millisecond)
	switch e.Action {
	case "pass":
		fmt.Fprintf(s.out, "ok\t%s\t%s\n", e.Package, elapsed)
	case "skip":
		fmt.Fprintf(s.out, "?\t%s\t[no test files]\n", e.Package)
	case "fail":
		s.failedPackages = append(s.failedPackages, e.Package)
		// Tests that never finished (a timeout, a panic in another test)
		// are shown, and the package's own output says why.
		for k2, l2 := range s.running {
			if k2.pkg == e.Package {
				fmt.Fprintf(s.out, "--- UNFINISHED: %s.%s\n%s", k2.pkg, k2.test, strings.Join(l2, ""))
				delete(s.running, k2)
			}
		}
		fmt.Fprintf(s.out, "FAIL\t%s\t%s\n%s", e.Package, elapsed, strings.Join(lines, ""))
	}
}

// reason is a skipped test's message: its output without the go test
// framing lines.
func reason(lines []string) string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		out = append(out, t)
	}
	return strings.Join(out, " ")
}

// report writes the summary and says whether the run is green: no failure
// and every required tool used.
func (s *summary) report(required []string) bool {
	ok := s.failed == 0 && len(s.failedPackages) == 0 && !s.buildFailed
	fmt.Fprintf(s.out, "\n=== summary: %d passed, %d failed, %d skipped (tests and subtests)\n", s.passed, s.failed, s.skipped)
	skips := slices.Clone(s.skips)
	slices.Sort(skips)
	for _, sk := range skips {
		fmt.Fprintf(s.out, "skipped: %s\n", sk)
	}
	names := make([]string, 0, len(s.tools))
	for name := range s.tools {
		names = append(names, name)
	}
	for _, name := range required {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(s.out, "tool %s: used by %d tests\n", name, s.tools[name])
	}
	for _, name := range required {
		if s.tools[name] == 0 {
			ok = false
			fmt.Fprintf(s.out, "FAIL: no test used %s, which this run requires: is it installed and on PATH?\n", name)
		}
	}
	timed := slices.Clone(s.timed)
	slices.Sort(timed)
	for _, t := range timed {
		fmt.Fprintf(s.out, "timed: %s\n", t)
	}
	slow := slices.Clone(s.slow)
	slices.SortStableFunc(slow, func(a, b slowTest) int { return cmp.Compare(b.elapsed, a.elapsed) })
	for _, st := range slow[:min(slowest, len(slow))] {
		fmt.Fprintf(s.out, "slow: %s %s\n", st.name, time.Duration(st.elapsed*float64(time.Second)).Round(100*time.Millisecond))
	}
	if len(s.failedPackages) > 0 {
		fmt.Fprintf(s.out, "failed packages: %s\n", strings.Join(s.failedPackages, " "))
	}
	return ok
}
