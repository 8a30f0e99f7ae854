// Package deploy tests what installs quotaplane into an existing cluster:
// the Helm chart deploy/chart/quotaplane, the plain manifests rendered from
// it (deploy/manifests/quotaplane.yaml) and the container recipe
// (deploy/Dockerfile).
//
// Its contract: the chart loads, lints clean and renders with the Helm SDK
// (a Go library: nothing is skipped when only Go is installed); what it
// renders keeps its invariants (non-root pods, the webhook failing closed
// and leaving the system's namespaces alone) and is accepted by a running
// quotaplane server standing in for the cluster; the plain manifests, the
// chart's copies of the CRDs and of the shipped ClusterRoles are what the
// chart and config/ make of them now (regenerate them with
// `go test ./test/deploy -run TestGenerated -update`); the Dockerfile builds
// a static binary into a non-root final image. Render and Manifests are the
// package's helpers for those tests.
package deploy
