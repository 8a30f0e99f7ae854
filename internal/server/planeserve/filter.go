package planeserve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/endpoints/responsewriter"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// Outer runs before every filter of the handler chain: a request to a
// plane's URL continues with the path within the plane, and the plane (its
// name; not yet resolved) in its context, so that request info, priority
// and fairness, audit and the authorizer see a plain Kubernetes request.
// A path a plane does not serve (planes.Serves: the root's /metrics,
// /debug/pprof, the member clusters' review endpoint...) is answered 404
// here, before authentication, whatever the identity.
func Outer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, rest, ok := planes.SplitPath(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if !planes.Serves(rest) {
			requests.WithLabelValues(string(p.Kind), strconv.Itoa(http.StatusNotFound)).Inc()
			writeStatus(w, &statusError{http.StatusNotFound, fmt.Sprintf("%s is not served in a control plane: a control plane serves %s; "+
				"the rest is the server's own, at its root URL, to the identities allowed there", rest, planes.ServedPaths)})
			return
		}
		r = r.Clone(planes.WithPlane(r.Context(), p))
		r.URL.Path, r.URL.RawPath = rest, ""
		r.RequestURI = r.URL.RequestURI()
		rec := &codeRecorder{ResponseWriter: w}
		defer func() { requests.WithLabelValues(string(p.Kind), rec.status()).Inc() }()
		next.ServeHTTP(responsewriter.WrapForHTTP1Or2(rec), r)
	})
}

// Inner runs after authentication and authorization, just before the API's
// handlers: the plane is resolved to its Ready owner (a plane whose owner
// does not exist, is not Ready or is being deleted is not served) and
// prepared the first time it is used.
func Inner(reg *Registry, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := planes.From(r.Context())
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		resolved, err := reg.Resolve(p)
		if u, ok := request.UserFrom(r.Context()); err == nil && (!ok || u.GetName() != user.APIServerUser) {
			// The server's own requests (preparing the plane among them)
			// do not wait for the preparation.
			err = reg.Prepare(r.Context(), resolved)
		}
		if err != nil {
			writeStatus(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(planes.WithPlane(r.Context(), resolved)))
	})
}

// writeStatus answers a request with a Kubernetes Status.
func writeStatus(w http.ResponseWriter, err error) {
	code, reason := http.StatusInternalServerError, metav1.StatusReasonInternalError
	var se *statusError
	if errors.As(err, &se) {
		code = se.code
		switch code {
		case http.StatusNotFound:
			reason = metav1.StatusReasonNotFound
		case http.StatusServiceUnavailable:
			reason = metav1.StatusReasonServiceUnavailable
		}
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Message: err.Error(), Reason: reason, Code: int32(code)}
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}
