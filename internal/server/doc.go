// Package server assembles quotaplane serve: embedded etcd (or an external
// one), a Kubernetes-compatible API server built from the generic control
// plane libraries, the upstream controllers the built-in API needs, and the
// quota CRDs and controllers.
//
// It follows the Kubernetes shape: Options → Complete → Validate → Config →
// Complete → New → Run. A CompletedConfig cannot be built outside this
// package. etcd is ready before the API server starts and stops after it.
package server
