package planes

import "strings"

// servedRoots are the non-resource paths a plane answers, with everything
// below them: discovery (and every resource request) under /api and /apis,
// OpenAPI, the version and the health checks. Every other path of the root
// (its /metrics, /debug/pprof, the member clusters' review endpoint, the
// service account issuer's documents, the portal) is not a plane's.
var servedRoots = []string{"/api", "/apis", "/openapi", "/version", "/healthz", "/livez", "/readyz"}

// ServedPaths says, for messages, which paths a plane serves.
const ServedPaths = "its API and discovery (/api, /apis), /openapi, /version and the health checks (/healthz, /livez, /readyz)"

// Serves reports whether a plane answers path, a path within the plane
// (SplitPath's rest). A path that is not clean (an empty, "." or ".."
// segment; a trailing slash is allowed) is never served, so that no
// handler's own path cleaning can take it elsewhere.
func Serves(path string) bool {
	if !clean(path) {
		return false
	}
	for _, root := range servedRoots {
		if path == root || strings.HasPrefix(path, root+"/") {
			return true
		}
	}
	return false
}

func clean(path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	segs := strings.Split(path[1:], "/")
	for i, s := range segs {
		if s == "." || s == ".." || (s == "" && i != len(segs)-1) {
			return false
		}
	}
	return true
}
