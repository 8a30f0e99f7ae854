// Package quietlog is serve's default logging: what an operator needs —
// quotaplane's own start-up, readiness and leadership messages, and errors —
// and not the hundreds of lines the embedded Kubernetes libraries print while
// they start (gRPC connection warnings, API groups skipped, controllers
// starting). `-v=1` or higher, or a format other than text, leaves logging as
// the Kubernetes logging flags configure it.
//
// The ready line is the first thing it writes: quotaplane's own lines
// before it are held (each formatted when logged, with its time and caller)
// and written right after it, or at once with an error of quotaplane's own.
// Between start-up and shutdown it drops one error only: the field
// manager's "[SHOULD NOT HAPPEN] failed to update managedFields", which the
// API server logs for every request whose field has the wrong type, a
// request refused with its own clear answer (bad input is the client's to
// see, not the operator's). Errors the
// libraries log before the server is ready (races of their own controllers
// against namespaces not created yet) and once a shutdown began (their
// clients racing against the stopping server: "connection refused") are not
// shown: a failure is said by quotaplane's own one-line error, and -v=1
// shows everything.
package quietlog
