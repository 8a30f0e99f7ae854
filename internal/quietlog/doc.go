// Package quietlog is serve's default logging: what an operator needs —
// quotaplane's own start-up, readiness and leadership messages, and errors —
// and not the hundreds of lines the embedded Kubernetes libraries print while
// they start (gRPC connection warnings, API groups skipped, controllers
// starting). `-v=1` or higher, or a format other than text, leaves logging as
// the Kubernetes logging flags configure it.
//
// Between start-up and shutdown it never drops an error. Errors the
// libraries log before the server is ready (races of their own controllers
// against namespaces not created yet) and once a shutdown began (their
// clients racing against the stopping server: "connection refused") are held
// back; they are printed if start-up or the shutdown fails.
package quietlog
