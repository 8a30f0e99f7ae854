//go:build kubectl

// Command kubectl is the Kubernetes CLI built from the Kubernetes module this
// repository pins (k8s.io/kubectl at the go.mod version), for machines whose
// package manager has none or one too old for the skew policy against serve's
// v1.36. `.ci/run` builds it when no kubectl is on PATH:
//
//	go build -tags kubectl -o "$(go env GOPATH)/bin/kubectl" ./hack/kubectl
//
// The build tag keeps kubectl's packages out of `go vet ./...` and
// `go test ./...`, which would otherwise compile them on every run.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
		os.Exit(1)
	}
}
