package quotatest

import (
	"bufio"
	"os"
	"strings"
)

// Step is one "$ command" of a document's ```console blocks and the output
// shown under it.
type Step struct {
	Line    int
	Command string
	Want    []string
}

// ConsoleSteps reads the steps of every ```console block of a document, in
// order: the walkthroughs the tests run as written.
func ConsoleSteps(path string) ([]Step, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var steps []Step
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case l == "```console":
			in = true
		case in && l == "```":
			in = false
		case in && strings.HasPrefix(l, "$ "):
			steps = append(steps, Step{Line: n, Command: strings.TrimPrefix(l, "$ ")})
		case in && len(steps) > 0:
			steps[len(steps)-1].Want = append(steps[len(steps)-1].Want, l)
		}
	}
	return steps, sc.Err()
}
