// Package compute is the example owning service's controller: Instances
// (compute.example.com/v1alpha1) that take quota through pkg/quotaclaim,
// provision a machine (a ConfigMap standing for it) only once their claim is
// Granted, and wait, Pending, while it is denied. cmd: examples/owning-service.
package compute
