#!/usr/bin/env bash
# Generates the typed Go clients of the API (pkg/client): the clientset,
# listers, informers and apply configurations, with the Kubernetes code
# generators pinned in hack/tools/go.mod (the version of k8s.io/* in go.mod).
#
#   hack/update-clients.sh            regenerates pkg/client in place
#   hack/update-clients.sh OUT_DIR    writes OUT_DIR/pkg/client instead (the
#                                     generated-files check compares the two)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
out="${1:-$root}"
module=github.com/quotaplane/quotaplane
client="$module/pkg/client"
apis=("$module/api/quota/v1alpha1" "$module/api/resourcemanager/v1alpha1")
header="$root/hack/boilerplate.go.txt"
gen() { go tool -modfile="$root/hack/tools/go.mod" "$@"; }

if [ "$out" = "$root" ]; then
	rm -rf pkg/client
fi
gen applyconfiguration-gen --go-header-file "$header" \
	--output-dir "$out/pkg/client/applyconfiguration" --output-pkg "$client/applyconfiguration" "${apis[@]}"
gen client-gen --go-header-file "$header" --clientset-name versioned \
	--input-base "$module/api" --input quota/v1alpha1 --input resourcemanager/v1alpha1 \
	--apply-configuration-package "$client/applyconfiguration" \
	--output-dir "$out/pkg/client/clientset" --output-pkg "$client/clientset"
gen lister-gen --go-header-file "$header" \
	--output-dir "$out/pkg/client/listers" --output-pkg "$client/listers" "${apis[@]}"
gen informer-gen --go-header-file "$header" \
	--versioned-clientset-package "$client/clientset/versioned" --listers-package "$client/listers" \
	--output-dir "$out/pkg/client/informers" --output-pkg "$client/informers" "${apis[@]}"
