package version

import "testing"

// TestShortAndServerVersion: a release is its version; a development build
// names its revision (and a dirty tree); the server's gitVersion is the
// Kubernetes version with quotaplane's as semver build metadata.
func TestShortAndServerVersion(t *testing.T) {
	for _, tc := range []struct {
		b             Build
		short, server string
	}{
		{Build{Version: "v0.1.0", Revision: "3f2a1b9c0d1e2f3a", Kubernetes: "v1.36.3"}, "v0.1.0", "v1.36.3+quotaplane.v0.1.0"},
		{Build{Version: "dev", Revision: "3f2a1b9c0d1e2f3a", Kubernetes: "v1.36.3"}, "dev-3f2a1b9c0d1e", "v1.36.3+quotaplane.dev-3f2a1b9c0d1e"},
		{Build{Version: "dev", Revision: "3f2a1b9c0d1e2f3a-dirty", Kubernetes: "v1.36.3"}, "dev-3f2a1b9c0d1e-dirty", "v1.36.3+quotaplane.dev-3f2a1b9c0d1e-dirty"},
		{Build{Version: "dev"}, "dev", "v0.0.0+quotaplane.dev"},
		{Build{Version: "v1.0.0+weird/chars", Kubernetes: "v1.36.3"}, "v1.0.0+weird/chars", "v1.36.3+quotaplane.v1.0.0-weird-chars"},
	} {
		if got := tc.b.Short(); got != tc.short {
			t.Errorf("%+v: Short %q, want %q", tc.b, got, tc.short)
		}
		if got := tc.b.ServerGitVersion(); got != tc.server {
			t.Errorf("%+v: ServerGitVersion %q, want %q", tc.b, got, tc.server)
		}
	}
}
