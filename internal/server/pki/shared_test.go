package pki

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallSharedMakesReplicasOneCA: a replica whose data directory
// starts from a shared directory serves with a certificate of the shared
// CA, and when the shared CA is replaced its certificates are signed again
// by the new one at the next start; a directory holding none of the files
// is refused.
func TestInstallSharedMakesReplicasOneCA(t *testing.T) {
	first, err := Ensure(filepath.Join(t.TempDir(), "first"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "second", "pki")
	verifiesWith := func(shared Files) {
		t.Helper()
		if err := InstallShared(shared.Dir, dir); err != nil {
			t.Fatal(err)
		}
		got, err := Ensure(dir, nil, []string{"quotaplane.quota-system.svc"})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range SharedFiles {
			a, _ := os.ReadFile(filepath.Join(shared.Dir, name))
			b, _ := os.ReadFile(filepath.Join(got.Dir, name))
			if !bytes.Equal(a, b) {
				t.Errorf("%s is not the shared one", name)
			}
		}
		cas, err := Certificates(shared.CACert)
		if err != nil {
			t.Fatal(err)
		}
		serving, err := Certificates(got.ServingCert)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(cas[0])
		if _, err := serving[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: "quotaplane.quota-system.svc"}); err != nil {
			t.Errorf("the serving certificate is not the shared CA's for the --tls-san name: %v", err)
		}
	}
	verifiesWith(first)
	replaced, err := Ensure(filepath.Join(t.TempDir(), "replaced"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	verifiesWith(replaced)

	if err := InstallShared(t.TempDir(), dir); err == nil {
		t.Error("a shared directory holding none of the files was taken")
	}
}
