#!/usr/bin/env bash
# Regenerates the Kubernetes-style protobuf serialization of the API types:
# generated.proto and generated.pb.go in each API package, and the
# `protobuf:"..."` struct tags on the Go fields. It uses go-to-protobuf and its
# protoc-gen-gogo plugin from k8s.io/code-generator, the generator that
# produces the same files for k8s.io/api.
#
# Requires protoc on PATH. Everything else (the generator binaries, goimports,
# the .proto files of k8s.io/apimachinery and gogo.proto) comes from the Go
# module proxy or cache and is placed in a temporary directory that is removed
# on exit. The output is deterministic: running the script again on its own
# output changes nothing.
set -euo pipefail

# Pinned versions. CODE_GENERATOR_VERSION should follow the k8s.io/* version in
# go.mod; the .proto files of k8s.io/apimachinery are taken from the version in
# go.mod.
CODE_GENERATOR_VERSION=v0.36.3
GOIMPORTS_VERSION=v0.47.0 # golang.org/x/tools, for goimports
GOGO_PROTOBUF_VERSION=v1.3.2

MODULE=github.com/quotaplane/quotaplane
PACKAGES=(
	"${MODULE}/api/quota/v1alpha1"
	"${MODULE}/api/resourcemanager/v1alpha1"
)
# Packages the API types refer to; their generated.proto files are imported,
# never regenerated (the leading "-").
APIMACHINERY_PACKAGES=(
	-k8s.io/apimachinery/pkg/util/intstr
	-k8s.io/apimachinery/pkg/api/resource
	-k8s.io/apimachinery/pkg/runtime/schema
	-k8s.io/apimachinery/pkg/runtime
	-k8s.io/apimachinery/pkg/apis/meta/v1
)

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "${REPO_ROOT}"

if ! command -v protoc >/dev/null 2>&1; then
	cat >&2 <<'EOF'
error: protoc (the Protocol Buffers compiler) is not on PATH.
Install it, for example:
  Debian/Ubuntu: sudo apt-get install -y protobuf-compiler
  macOS:         brew install protobuf
  otherwise:     a release from https://github.com/protocolbuffers/protobuf/releases
then run this script again.
EOF
	exit 1
fi

TMP_DIR=$(mktemp -d "${TMPDIR:-/tmp}/update-protobuf.XXXXXX")
cleanup() { rm -rf "${TMP_DIR}"; }
trap cleanup EXIT

# Generator binaries, built into a private GOBIN. go-to-protobuf finds
# protoc-gen-gogo (and goimports, which it runs on its output) on PATH.
export GOBIN="${TMP_DIR}/bin"
echo "Installing go-to-protobuf and protoc-gen-gogo ${CODE_GENERATOR_VERSION}, goimports ${GOIMPORTS_VERSION}" >&2
go install \
	"k8s.io/code-generator/cmd/go-to-protobuf@${CODE_GENERATOR_VERSION}" \
	"k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo@${CODE_GENERATOR_VERSION}"
go install "golang.org/x/tools/cmd/goimports@${GOIMPORTS_VERSION}"
export PATH="${GOBIN}:${PATH}"

# module_dir prints the module cache directory of a module, downloading it
# first if needed.
module_dir() {
	go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}
apimachinery_version=$(go list -m -f '{{.Version}}' k8s.io/apimachinery)
APIMACHINERY_DIR=$(module_dir "k8s.io/apimachinery@${apimachinery_version}")
GOGO_DIR=$(module_dir "github.com/gogo/protobuf@${GOGO_PROTOBUF_VERSION}")
for d in "${APIMACHINERY_DIR}" "${GOGO_DIR}"; do
	if [[ -z "${d}" || ! -d "${d}" ]]; then
		echo "error: could not locate a module directory (got '${d}')" >&2
		exit 1
	fi
done

# go-to-protobuf runs protoc on <output-dir>/<import path>/generated.proto and
# protoc-gen-gogo writes <output-dir>/<import path>/generated.pb.go, so the
# output dir must be a GOPATH-style tree. Symlinks map the import paths to
# this checkout and to the module cache (read only; nothing is written there).
SRC="${TMP_DIR}/src"
mkdir -p "${SRC}/$(dirname "${MODULE}")" "${SRC}/k8s.io" "${SRC}/github.com/gogo"
ln -s "${REPO_ROOT}" "${SRC}/${MODULE}"
ln -s "${APIMACHINERY_DIR}" "${SRC}/k8s.io/apimachinery"
ln -s "${GOGO_DIR}" "${SRC}/github.com/gogo/protobuf"

echo "Generating protobuf for ${PACKAGES[*]}" >&2
go-to-protobuf \
	--go-header-file "${REPO_ROOT}/hack/boilerplate.go.txt" \
	--output-dir "${SRC}" \
	--proto-import "${GOGO_DIR}/protobuf" \
	--apimachinery-packages "$(IFS=,; echo "${APIMACHINERY_PACKAGES[*]}")" \
	--packages "$(IFS=,; echo "${PACKAGES[*]}")"
