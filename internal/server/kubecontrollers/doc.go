// Package kubecontrollers runs, inside quotaplane serve, the upstream
// Kubernetes controllers that make the built-in API behave as kubectl users
// expect: garbage collection of ownerReferences, namespace deletion, and the
// built-in ResourceQuota usage controller.
//
// Replicas of serve that share one etcd elect one of them on the Lease
// LeaseName; only that replica runs the controllers, and it stops them as
// soon as it loses the Lease. Campaigning never delays readiness.
//
// It only wires upstream controllers to a loopback client; it must never hold
// quota logic of its own.
package kubecontrollers
