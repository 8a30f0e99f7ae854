package main

import (
	"fmt"
	"os"

	"k8s.io/component-base/cli"
)

func main() {
	// Errors are one plain line on stderr, never a log record or a stack.
	if err := cli.RunNoErrOutput(newRootCommand()); err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}
