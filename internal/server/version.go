package server

import (
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"

	"github.com/quotaplane/quotaplane/internal/version"
)

// stampedVersion is the API server's version with quotaplane's build in
// what /version (kubectl version) reports: the Kubernetes libraries' own
// is "v0.0.0-master+$Format:%H$" unless they are built with ldflags.
// Everything that decides behaviour (binary, emulation and compatibility
// versions) is the embedded one's.
type stampedVersion struct {
	basecompatibility.EffectiveVersion
}

func (s stampedVersion) Info() *apimachineryversion.Info {
	info := s.EffectiveVersion.Info()
	if info == nil {
		return nil
	}
	b := version.Get()
	info.GitVersion = b.ServerGitVersion()
	info.GitCommit = b.Revision
	if b.Revision != "" {
		info.GitTreeState = "clean"
		if len(b.Revision) > 6 && b.Revision[len(b.Revision)-6:] == "-dirty" {
			info.GitTreeState = "dirty"
		}
	}
	return info
}
