package ociimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestAnImageRoundTrips: an image built from a static binary unpacks to
// the layout and configuration the chart relies on (the entrypoint, the
// non-root user and its passwd entry, the CA bundle, a data directory the
// user owns), and one binary makes one digest.
func TestAnImageRoundTrips(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "static")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a static binary: %v\n%s", err, out)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := Build(Options{Binary: bin, CABundle: ca, Version: Version})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(Options{Binary: bin, CABundle: ca, Version: Version})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("one binary made two digests, %s and %s", d1, d2)
	}
	tarball := filepath.Join(dir, "image.tar")
	if _, err := Write(img, Reference, tarball); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	cfg, err := Extract(tarball, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != Entrypoint || cfg.User != "65532:65532" {
		t.Errorf("the image runs %v as %q; want %s as 65532:65532", cfg.Entrypoint, cfg.User, Entrypoint)
	}
	if fi, err := os.Stat(filepath.Join(root, Entrypoint)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the entrypoint: %v, %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp unpacked as %v (%v); want a sticky 1777 directory", fi.Mode(), err)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd names no user 65532:\n%s", passwd)
	}
	if got, _ := os.ReadFile(filepath.Join(root, CABundle)); !strings.Contains(string(got), "BEGIN CERTIFICATE") {
		t.Errorf("the CA bundle is not in the image at %s", CABundle)
	}
	if os.Geteuid() == 0 {
		fi, err := os.Stat(filepath.Join(root, DataDir))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != UID || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s is owned by %d with mode %v; want %d, 0700", DataDir, st.Uid, fi.Mode().Perm(), UID)
		}
	}
}

// TestADynamicBinaryIsRefused: the image has no libc, so a binary that
// asks for a dynamic loader is refused, saying how to build one.
func TestADynamicBinaryIsRefused(t *testing.T) {
	dynamic := ""
	for _, p := range []string{"/bin/true", "/usr/bin/true", "/bin/sh"} {
		if b, err := os.ReadFile(p); err == nil && !isStatic(b) {
			dynamic = p
			break
		}
	}
	if dynamic == "" {
		if v := os.Getenv("CI"); v == "true" || v == "1" {
			t.Fatal("CI=true but no dynamically linked program (/bin/true, /bin/sh) is here to try")
		}
		t.Skip("no dynamically linked program on this machine to try; with CI=true this test fails instead")
	}
	if _, err := Build(Options{Binary: dynamic, CABundle: dynamic}); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("packing %s: %v; want a refusal saying CGO_ENABLED=0", dynamic, err)
	}
}
