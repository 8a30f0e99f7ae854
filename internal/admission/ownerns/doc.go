// Package ownerns answers requests into a namespace quotaplane makes for
// a tenant — organization-<name> for an Organization, project-<name> for a
// Project — before that namespace exists: applied in one sync with its
// tenant, the request waits a bounded moment for the namespace; applied
// before its tenant, it is answered with a status clients retry, naming the
// tenant (docs/tenancy.md "Applies in any order"). Both the admission of
// objects into such a namespace (Plugin, ahead of NamespaceLifecycle) and
// the charging component placing a claim there (Waiter) ask it.
package ownerns
