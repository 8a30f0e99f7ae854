// Command quotaplane is the quota control plane: one binary that serves the
// quota API with embedded etcd, or runs the quota controllers against another
// cluster.
package main

import (
	"os"

	"k8s.io/component-base/cli"
)

func main() {
	os.Exit(cli.Run(newRootCommand()))
}
