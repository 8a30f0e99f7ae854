// Package rbac embeds the ClusterRoles quotaplane ships (docs/authorization.md).
package rbac
