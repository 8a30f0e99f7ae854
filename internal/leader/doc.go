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
// (internal/tenancy, Lease quotaplane-tenancy), the grant engine
// (internal/grantpolicy) and the quota engine (internal/engine, whose terms
// are fenced besides; a lead error wrapping ErrStop ends its campaign). Each
// builds what a term runs — informers, queues, workers — when the term
// begins, inside its lead function, and stops it there before returning:
// standbys watch nothing, and a replica whose Lease was lost keeps serving
// and campaigns again with a fresh term.
package leader
