// Package ociimage builds quotaplane's container image without a container
// daemon or a registry: one layer on an empty base (go-containerregistry's
// empty.Image and mutate) holding the static binary, a CA bundle, and the
// passwd and group entries of the non-root user it runs as, written as an
// image tarball that docker load, podman load and crane push read.
package ociimage
