#!/usr/bin/env bash
# Regenerates deepcopy functions, CRD manifests and the typed clients from the
# API types.
# controller-gen is pinned in hack/tools/go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
cg() { go tool -modfile=hack/tools/go.mod controller-gen "$@"; }
cg object:headerFile=hack/boilerplate.go.txt paths=./api/...
rm -rf config/crd/bases
cg crd:crdVersions=v1 paths=./api/... output:crd:dir=config/crd/bases
# QuotaReview is never stored: serve answers it, and no cluster gets its CRD;
# serve reads its schema (OpenAPI, kubectl explain) from config/crd/review.
mkdir -p config/crd/review
mv config/crd/bases/quota.miloapis.com_quotareviews.yaml config/crd/review/
# The typed clients (pkg/client).
hack/update-clients.sh
# The Helm chart's copies of the CRDs and ClusterRoles, and the plain
# manifests rendered from it (test/deploy).
go test ./test/deploy -run '^TestGenerated$' -count=1 -update
