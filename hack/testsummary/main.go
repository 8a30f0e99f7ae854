// Command testsummary reads `go test -json` on standard input and writes
// what CI needs to read: each package's result as it finishes, the whole
// output of every failed test (and of a package that failed outside its
// tests, such as a timeout or a panic), and at the end a summary: how many
// tests passed, failed and skipped, each skipped test with its reason, how
// many tests used each external tool (the "uses-tool:" lines of
// test/tools), and every timed assertion's measurement ("timed-assertion:"
// lines of test/timed), and the slowest top-level tests ("slow:" lines).
//
// It exits 1 when a test or a build failed, or when a tool named by
// -require-tools was used by no test: `.ci/run` installs kubectl, Chromium
// and Prometheus so that their tests run, and a run in which none did is not
// the run it claims to be.
//
//	go test -json ./... | go run ./hack/testsummary -require-tools kubectl,chromium,prometheus,promtool
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	requireTools := flag.String("require-tools", "", "comma-separated tools that at least one test must have used")
	flag.Parse()
	var required []string
	if *requireTools != "" {
		required = strings.Split(*requireTools, ",")
	}
	s := newSummary(os.Stdout)
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: reading go test -json: %v\n", err)
		os.Exit(2)
	}
	if !s.report(required) {
		os.Exit(1)
	}
}
