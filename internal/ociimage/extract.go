package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Extract unpacks the image tarball at path into dir, layer by layer as a
// container runtime would (owners kept when run as root), and returns the
// image's configuration: its entrypoint, user and environment.
func Extract(path, dir string) (*v1.Config, error) {
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		return nil, fmt.Errorf("reading image %s: %w", path, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		err = untar(rc, dir)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %d of %s: %w", i, path, err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	return &cf.Config, nil
}

// untar writes a layer's directories and regular files under dir; a
// whiteout removes what an earlier layer wrote.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		clean := filepath.Clean("/" + h.Name)
		target := filepath.Join(dir, clean)
		if base := filepath.Base(clean); strings.HasPrefix(base, ".wh.") {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(target), strings.TrimPrefix(base, ".wh."))); err != nil {
				return err
			}
			continue
		}
		// tar's mode bits: the permissions, and the sticky bit (0o1000),
		// which Go's FileMode keeps elsewhere.
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: entries of type %q are not unpacked", h.Name, h.Typeflag)
		}
		if err := os.Chmod(target, mode); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(target, h.Uid, h.Gid); err != nil {
				return err
			}
		}
	}
}
