// Package tenancy runs the controllers of the tenancy kinds
// (resourcemanager.miloapis.com): one for Organizations, one for Projects,
// run by Start on the leader of their own Lease (quotaplane-tenancy, in the
// system namespace, through internal/leader), in serve and in quotaplane
// controller alike.
//
// They follow the engine's style: each term of leadership builds client-go
// shared informers (every Organization and Project; only the namespaces and
// RBAC objects labelled with an organization's name), whose handlers map
// each change to the keys it concerns (a namespace or binding to the
// organization it is labelled with, a project to its organization, an
// organization to its projects); one rate-limited workqueue per controller,
// reconciled by internal/reconcile's worker loop once every handler has seen
// its informer's first list. The reconcilers are level-based and read only
// the informers' stores (and the API server for what those do not hold);
// their reads and writes are fields, so unit tests need no server. When the
// term ends the queues are shut down and every goroutine it started has
// returned before the replica campaigns again.
//
// The organization controller gives each Organization its namespace
// organization-<name> (labelled and controlled by it), the RoleBinding there
// that makes its creator its owner, and a ClusterRole and ClusterRoleBinding
// that let that owner read and charge the organization and create projects
// (admission decides in which organization). Deleting an organization deletes
// its projects and its namespace — with every grant, claim and bucket in it —
// and its finalizer holds it until they are gone. The project controller keeps
// a Project's label and ownerReference and reports whether its organization
// exists.
//
// These controllers write only through the API server, only the objects named
// above, and never touch quota records themselves: the namespace controller
// removes what lives in a deleted namespace, and the quota engine releases
// the quota its claims held.
package tenancy
