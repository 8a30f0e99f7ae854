package pki

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SharedFiles are the files every replica of one control plane shares,
// by name under <data-dir>/pki: the CA (clients trust one CA whichever
// replica answers), the service-account key (a token any replica issued
// is valid at every other) and the peer CA (replicas trust each other).
var SharedFiles = []string{"ca.crt", "ca.key", "service-account.key", "peer-ca.crt", "peer-ca.key"}

// InstallShared copies the SharedFiles found in src (a mounted Secret, say)
// into dir, the replica's pki directory. A file that is in neither is made
// by Ensure; one src lacks but dir has is kept. When a CA changes, the
// certificates it signed are removed for Ensure to sign them again.
func InstallShared(src, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	f := FilesIn(dir)
	signedBy := map[string][]string{
		"ca.crt":      {f.ServingCert, f.ServingKey, f.AdminCert, f.AdminKey},
		"ca.key":      {f.ServingCert, f.ServingKey, f.AdminCert, f.AdminKey},
		"peer-ca.crt": {f.PeerCert, f.PeerKey},
		"peer-ca.key": {f.PeerCert, f.PeerKey},
	}
	found := 0
	for _, name := range SharedFiles {
		data, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the shared %s from --shared-pki-dir: %w", name, err)
		}
		found++
		target := filepath.Join(dir, name)
		old, err := os.ReadFile(target)
		if err == nil && bytes.Equal(old, data) {
			continue
		}
		mode := os.FileMode(0o600)
		if filepath.Ext(name) == ".crt" {
			mode = 0o644
		}
		if err := writeAtomic(target, data, mode); err != nil {
			return fmt.Errorf("installing the shared %s: %w", name, err)
		}
		for _, p := range signedBy[name] {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if found == 0 {
		return fmt.Errorf("--shared-pki-dir %s holds none of %v: give the directory where the shared Secret is mounted", src, SharedFiles)
	}
	return nil
}
