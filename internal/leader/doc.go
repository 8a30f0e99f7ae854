// Package leader is quotaplane's one owner of leader election for
// controllers: it runs a set of controllers on whichever replica holds a
// Lease, built on client-go's leaderelection (LeaderElectionConfig, LeaseLock,
// OnStartedLeading/OnStoppedLeading). It campaigns, runs the controllers for
// the length of a won term, stops them when the Lease is lost, waits until
// they have returned, and campaigns again. It knows nothing of the
// controllers it runs and never touches anything but its Lease and the
// namespace that holds it.
//
// Who uses it: the upstream controllers in serve (server/kubecontrollers,
// Lease quotaplane-kube-controllers), the tenancy controllers
// (internal/tenancy, Lease quotaplane-tenancy) and the grant engine
// (internal/grantpolicy). Tenancy's controllers run in a controller-runtime
// manager, but not under the manager's own LeaderElection option: that
// manager starts its caches before it is elected (every standby would watch
// namespaces and RBAC), ends for good on a lost Lease (a manager cannot be
// started twice, and serve must keep serving and campaign again), and does not
// create the Lease's namespace. So each term gets a fresh manager without
// leader election, run by Campaign. The quota engine has its own, fenced,
// terms (internal/engine) and does not use this package.
package leader
