// Package members says what a member cluster is to the quota plane: a
// Kubernetes cluster, other than the quota plane, whose creates and updates
// `quotaplane webhook` submits to the quota plane's engine (docs/clusters.md).
// It names the cluster's claims (their label and namespace), the path the
// webhook submits reviews to, and the request context that carries the
// cluster a review came from. It holds no state and writes nothing.
package members
