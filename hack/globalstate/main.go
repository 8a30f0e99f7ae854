// Command globalstate runs the package-level mutable state analyzer
// (internal/lint/globalstate) as a vet tool:
//
//	go build -o /tmp/globalstate ./hack/globalstate
//	go vet -vettool=/tmp/globalstate ./...
package main

import (
	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/quotaplane/quotaplane/internal/lint/globalstate"
)

func main() { unitchecker.Main(globalstate.Analyzer()) }
