// Package crdinstall installs the quota CRDs into an API server and waits until
// they are established, then the ClusterRoles quotaplane ships. It is idempotent: an existing CRD is updated in place
// when its schema differs, and left alone otherwise.
package crdinstall
