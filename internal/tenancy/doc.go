// Package tenancy runs the controllers of the tenancy kinds
// (resourcemanager.miloapis.com): one for Organizations, one for Projects,
// wired by Setup and run by Start on the leader of their own Lease
// (quotaplane-tenancy, in the system namespace), in serve and in
// quotaplane controller alike.
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
