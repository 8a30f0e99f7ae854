// Package collect is the garbage collector and namespace controller of the
// control planes: one worker pool for every plane, never a controller per
// plane. A plane's storage tells it when an object there is deleted or
// marked for deletion; a pass over that plane (or that namespace of it)
// then acts as Kubernetes' own controllers would: the contents of a
// namespace being deleted are deleted before the namespace is finalized,
// dependents whose owners are gone are deleted, foreground deletion waits
// for blocking dependents, orphaning removes the owner from its dependents.
// The leader of the replicas also sweeps every plane holding data, at the
// start of its term and periodically, so that nothing a crash interrupted
// is left. Every change is a request to the plane through the API, so
// admission and the quota engine see it as any other (docs/control-planes.md
// "Garbage collection and namespaces").
package collect
