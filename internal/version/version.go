package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is set at build time with
// -ldflags "-X github.com/quotaplane/quotaplane/internal/version.Version=v1.2.3";
// when it is not, the module version (go install …@v1.2.3) is used.
var Version = ""

// Build is what the binary knows of itself.
type Build struct {
	// Version: set with -ldflags, else the module's version, else "dev".
	Version string
	// Revision is the VCS revision go build stamped ("" when unknown, as
	// with go run), with "-dirty" when the tree had uncommitted changes.
	Revision string
	// Kubernetes is the version of the k8s.io/kubernetes libraries.
	Kubernetes string
}

// Get reads the build.
func Get() Build {
	b := Build{Version: Version}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if b.Version == "" {
			b.Version = "dev"
		}
		return b
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	// go build in a clone stamps a pseudo-version made of the revision
	// (v0.0.0-20261125075149-10f6e13e3426+dirty): a development build.
	pseudo := len(b.Revision) >= 12 && strings.Contains(info.Main.Version, b.Revision[:12])
	if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" && !pseudo {
		b.Version = info.Main.Version
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Revision != "" && dirty {
		b.Revision += "-dirty"
	}
	for _, d := range info.Deps {
		if d.Path == "k8s.io/kubernetes" {
			b.Kubernetes = d.Version
		}
	}
	return b
}

// Short is the version and, for a development build, the first 12
// characters of its revision: "v0.1.0", "dev-3f2a1b9c0d1e", "dev-3f2a1b9c0d1e-dirty" or "dev".
func (b Build) Short() string {
	if b.Version != "dev" || b.Revision == "" {
		return b.Version
	}
	rev, dirty := strings.CutSuffix(b.Revision, "-dirty")
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "dev-" + rev
}

// ServerGitVersion is what the API server reports as its gitVersion
// (kubectl version): the Kubernetes version it is built on, with
// quotaplane's version as semver build metadata, for example
// v1.36.3+quotaplane.dev-3f2a1b9c0d1e.
func (b Build) ServerGitVersion() string {
	k8s := b.Kubernetes
	if k8s == "" {
		k8s = "v0.0.0"
	}
	meta := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '.' {
			return r
		}
		return '-'
	}, b.Short())
	return k8s + "+quotaplane." + meta
}

// String describes this build: version, VCS revision when known, Go version
// and the Kubernetes libraries it is built on.
func String() string {
	b := Get()
	rev, k8s := b.Revision, b.Kubernetes
	if rev == "" {
		rev = "unknown: built with go run, or outside a git clone"
	}
	if k8s == "" {
		k8s = "unknown"
	}
	return fmt.Sprintf("quotaplane %s (revision %s, %s, kubernetes libraries %s)", b.Short(), rev, runtime.Version(), k8s)
}
