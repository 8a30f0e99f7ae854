package server

import (
	"net/http"

	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// reportCreateOutcomes wraps the API handler, inside every filter of the
// chain (the request timeout included), so that the engine learns how each
// create or update (a POST, PUT or PATCH, also through the scale
// subresource) whose quota it granted at admission ended: stored, or refused
// after admission. It sees the handler's own end even when the client was
// already answered with a timeout.
func reportCreateOutcomes(handle *route.Handle, next func(http.Handler, *genericapiserver.Config) http.Handler) func(http.Handler, *genericapiserver.Config) http.Handler {
	return func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			info, ok := request.RequestInfoFrom(r.Context())
			if !ok || !info.IsResourceRequest || !createsObjects[info.Verb] || (info.Subresource != "" && info.Subresource != "scale") {
				apiHandler.ServeHTTP(w, r)
				return
			}
			ctx, rec := route.WithRequestGrants(r.Context())
			sw := &statusRecorder{ResponseWriter: w}
			ended := false
			defer func() {
				status := sw.status
				if !ended {
					status = 0 // panicked: whether it stored is unclear
				}
				handle.CreateEnded(rec, status)
			}()
			apiHandler.ServeHTTP(responsewriter.WrapForHTTP1Or2(sw), r.WithContext(ctx))
			ended = true
		})
		return next(inner, c)
	}
}

// createsObjects are the verbs that can create an object: POST, and a PUT or
// (server-side apply) PATCH of an object that does not exist yet.
var createsObjects = map[string]bool{"create": true, "update": true, "patch": true}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

var _ responsewriter.UserProvidedDecorator = &statusRecorder{}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
