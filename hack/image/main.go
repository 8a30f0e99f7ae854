// Command image builds quotaplane's container image, an image tarball,
// without a container daemon or a registry (internal/ociimage), from the
// very binary the tests run (test/quotatest: static, built once per run).
// .ci/run builds it; load it with docker load -i, podman load -i, or push
// it with crane push <file> <registry>/quotaplane:<tag>.
//
//	go run ./hack/image -o /tmp/quotaplane-image.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/quotaplane/quotaplane/internal/ociimage"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

func main() {
	out := flag.String("o", "quotaplane-image.tar", "the image tarball to write")
	ref := flag.String("tag", ociimage.Reference, "the reference the tarball names (docker load tags it so)")
	binary := flag.String("binary", "", "a static quotaplane binary to pack instead of building the tests' one")
	ca := flag.String("ca-bundle", ociimage.DefaultCABundle, "the PEM CA bundle to pack")
	flag.Parse()
	if err := run(*out, *ref, *binary, *ca); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, ref, binary, ca string) error {
	if binary == "" {
		var err error
		if binary, err = quotatest.SharedBinary(); err != nil {
			return err
		}
	}
	revision, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	img, err := ociimage.Build(ociimage.Options{Binary: binary, CABundle: ca, Version: ociimage.Version,
		Revision: strings.TrimSpace(string(revision))})
	if err != nil {
		return err
	}
	size, err := ociimage.Write(img, ref, out)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s, %.1f MiB (%d bytes), %s\n", out, ref, float64(size)/(1<<20), size, digest)
	return nil
}
