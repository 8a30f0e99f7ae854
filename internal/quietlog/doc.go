// Package quietlog is serve's default logging: what an operator needs —
// quotaplane's own start-up, readiness and leadership messages, and errors —
// and not the hundreds of lines the embedded Kubernetes libraries print while
// they start (gRPC connection warnings, API groups skipped, controllers
// starting). `-v=1` or higher, or a format other than text, leaves logging as
// the Kubernetes logging flags configure it.
//
// It never drops an error after start-up. Errors the libraries log before the
// server is ready (races of their own controllers against namespaces not
// created yet) are held back and counted; they are printed if start-up fails.
package quietlog
