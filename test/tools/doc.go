// Package tools finds the programs some tests drive — kubectl, a headless
// Chromium, Prometheus and promtool — and decides what a test does when one
// is missing.
//
// Outside CI a missing tool skips the test, saying which tool and how to
// install it. In CI (the environment variable CI is "true", as `.ci/run` and
// every CI service set it) a missing tool fails the test, naming the tool: a
// promise whose test cannot run is not checked, and CI must not go green on
// it. A test that found its tool logs one line, "uses-tool: <name> <path>",
// which `.ci/run`'s summary counts, so a run shows that each tool's tests
// really ran.
package tools
