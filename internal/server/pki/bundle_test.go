package pki

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAPeerCABundleRotates walks the peer CA's rotation (docs/operations.md)
// through Ensure: a bundle is kept as written; the peer certificate stays
// with the CA first in it, and is signed again when another CA comes first
// with its key; a key that is not the first certificate's stops Ensure
// saying so.
func TestAPeerCABundleRotates(t *testing.T) {
	dir := t.TempDir()
	old, err := Ensure(filepath.Join(dir, "replica"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Ensure(filepath.Join(dir, "next"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fingerprints := func(path string) []string {
		t.Helper()
		certs, err := Certificates(path)
		if err != nil {
			t.Fatal(err)
		}
		var fps []string
		for _, c := range certs {
			fps = append(fps, Fingerprint(c))
		}
		return fps
	}
	oldCA, nextCA := fingerprints(old.PeerCACert)[0], fingerprints(next.PeerCACert)[0]
	signer := func(f Files) string {
		t.Helper()
		peer, err := Certificates(f.PeerCert)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{old.PeerCACert, next.PeerCACert} {
			ca, err := Certificates(path)
			if err != nil {
				t.Fatal(err)
			}
			if peer[0].CheckSignatureFrom(ca[0]) == nil {
				return Fingerprint(ca[0])
			}
		}
		return "none"
	}
	bundle := func(paths ...string) []byte {
		t.Helper()
		var b []byte
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, data...)
		}
		return b
	}
	oldPEM, nextPEM := bundle(old.PeerCACert), bundle(next.PeerCACert)
	oldKey, nextKey := bundle(old.PeerCAKey), bundle(next.PeerCAKey)
	write := func(path string, data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// 1. The new CA added after the signing one: trusted, nothing re-signed.
	write(old.PeerCACert, append(append([]byte{}, oldPEM...), nextPEM...))
	if _, err := Ensure(old.Dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{oldCA, nextCA}, fingerprints(old.PeerCACert)); diff != "" {
		t.Errorf("step 1, the bundle (-want +got):\n%s", diff)
	}
	if got := signer(old); got != oldCA {
		t.Errorf("step 1: the peer certificate is signed by %s; want the old CA %s", got, oldCA)
	}

	// 2. The new CA first, with its key: the peer certificate is signed again by it.
	write(old.PeerCACert, append(append([]byte{}, nextPEM...), oldPEM...))
	write(old.PeerCAKey, nextKey)
	if _, err := Ensure(old.Dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{nextCA, oldCA}, fingerprints(old.PeerCACert)); diff != "" {
		t.Errorf("step 2, the bundle (-want +got):\n%s", diff)
	}
	if got := signer(old); got != nextCA {
		t.Errorf("step 2: the peer certificate is signed by %s; want the new CA %s", got, nextCA)
	}

	// 3. The old CA dropped.
	write(old.PeerCACert, nextPEM)
	if _, err := Ensure(old.Dir, nil, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{nextCA}, fingerprints(old.PeerCACert)); diff != "" {
		t.Errorf("step 3, the bundle (-want +got):\n%s", diff)
	}
	if got := signer(old); got != nextCA {
		t.Errorf("step 3: the peer certificate is signed by %s; want the new CA %s", got, nextCA)
	}

	// A key that is not the first certificate's.
	write(old.PeerCAKey, oldKey)
	_, err = Ensure(old.Dir, nil, nil)
	if err == nil || !strings.Contains(err.Error(), old.PeerCAKey) || !strings.Contains(err.Error(), old.PeerCACert) {
		t.Errorf("Ensure with another CA's key = %v; want an error naming %s and %s", err, old.PeerCAKey, old.PeerCACert)
	}
}
