package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Version is the version the image is labelled and tagged with: the
// chart's appVersion (test/deploy checks that they agree).
const Version = "0.1.0"

// Reference is the name the image tarball carries, and the image
// deploy/manifests and the chart name: local (nothing is published), to
// be loaded into the cluster's nodes (kind load image-archive) or pushed
// to a registry under a name of yours (crane push, then set image.repository).
const Reference = "localhost/quotaplane:" + Version

// Layout of the image.
const (
	// Entrypoint is where the binary is, and the image's entrypoint.
	Entrypoint = "/usr/local/bin/quotaplane"
	// CABundle is where the CA bundle is, Debian's path (Go's crypto/x509
	// reads it there).
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID are the user the image runs as: not root, and no user of
	// the host (distroless' nonroot).
	UID, GID = 65532, 65532
	// DataDir is serve's data directory in the chart, owned by UID.
	DataDir = "/var/lib/quotaplane"
	// DefaultCABundle is the host's bundle packed when none is given:
	// Debian's ca-certificates.
	DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Options say what goes into the image.
type Options struct {
	// Binary is the path of the static quotaplane binary (CGO_ENABLED=0).
	Binary string
	// CABundle is the path of the PEM CA bundle; DefaultCABundle when empty.
	CABundle string
	// Version labels the image (org.opencontainers.image.version).
	Version string
	// Revision labels the image with the git revision it was built from.
	Revision string
	// Created is the time stamped on the image and its files; the zero time
	// (1970) when unset, so that one binary always makes one digest.
	Created time.Time
}

// Build makes the image.
func Build(o Options) (v1.Image, error) {
	if o.CABundle == "" {
		o.CABundle = DefaultCABundle
	}
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary to pack: %w", err)
	}
	if !isStatic(bin) {
		return nil, fmt.Errorf("%s is linked dynamically: the image has no libc; build it with CGO_ENABLED=0", o.Binary)
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle to pack (Debian's ca-certificates package installs %s): %w", DefaultCABundle, err)
	}
	layerTar, err := rootfs(o, bin, ca)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "hack/image: quotaplane, CA bundle, passwd", Comment: "quotaplane " + o.Version}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Entrypoint = []string{Entrypoint}
	cf.Config.User = strconv.Itoa(UID) + ":" + strconv.Itoa(GID)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=" + CABundle}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "quotaplane",
		"org.opencontainers.image.source":   "https://github.com/quotaplane/quotaplane",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
	}
	return mutate.ConfigFile(img, cf)
}

// Write writes img as an image tarball tagged ref and returns its size in
// bytes.
func Write(img v1.Image, ref, path string) (int64, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return 0, fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// rootfs is the layer's tar: directories, then files, each owned by root
// but the data directory and the user's home, stamped with o.Created.
func rootfs(o Options, bin, ca []byte) ([]byte, error) {
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		body     []byte
		dir      bool
	}
	user := fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: UID, gid: GID, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "var/", mode: 0o755, dir: true},
		{name: "var/lib/", mode: 0o755, dir: true},
		{name: "var/lib/quotaplane/", mode: 0o700, uid: UID, gid: GID, dir: true},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\n" + user)},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID))},
		{name: CABundle[1:], mode: 0o644, body: ca},
		{name: Entrypoint[1:], mode: 0o755, body: bin},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: o.Created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
