// Package deploy tests what installs quotaplane into an existing cluster:
// the Helm chart deploy/chart/quotaplane, the plain manifests rendered from
// it (deploy/manifests/quotaplane.yaml) and the image (hack/image,
// internal/ociimage).
//
// Its contract: the chart loads, lints clean and renders with the Helm SDK
// (a Go library: nothing is skipped when only Go is installed); what it
// renders keeps its invariants (non-root pods, the webhook failing closed
// and leaving the system's namespaces alone) and is accepted by a running
// quotaplane server standing in for the cluster; the plain manifests, the
// chart's copies of the CRDs and of the shipped ClusterRoles are what the
// chart and config/ make of them now (regenerate them with
// `go test ./test/deploy -run TestGenerated -update`); and the quota plane
// the chart renders runs: its etcd members and serve replicas start from the
// image's root filesystem as their pods would (pods_test.go lists what is
// substituted), decide, and survive the loss of one. Render and Manifests
// are the package's helpers for those tests.
package deploy
