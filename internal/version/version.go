package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at build time with -ldflags "-X .../internal/version.Version=v1.2.3".
var Version = "dev"

// String describes this build: version, VCS revision when known, Go version
// and the Kubernetes libraries it is built on.
func String() string {
	rev := "unknown"
	k8s := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
		for _, d := range info.Deps {
			if d.Path == "k8s.io/kubernetes" {
				k8s = d.Version
			}
		}
	}
	return fmt.Sprintf("quotaplane %s (revision %s, %s, kubernetes libraries %s)", Version, rev, runtime.Version(), k8s)
}
