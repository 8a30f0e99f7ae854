package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEnsureEtcd: etcd gets a CA of its own — the API server's CA signs
// nothing etcd trusts — a serving certificate usable for its peer port too,
// and one client certificate; keys are readable by their owner only, and a
// second call keeps what is valid.
func TestEnsureEtcd(t *testing.T) {
	dir := t.TempDir()
	main, err := Ensure(filepath.Join(dir, "pki"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := EnsureEtcd(filepath.Join(dir, "pki", "etcd"))
	if err != nil {
		t.Fatal(err)
	}
	etcdCA, _, err := load(f.CACert, f.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	apiCA, _, err := load(main.CACert, main.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	server, _, err := load(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	client, _, err := load(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := load(main.AdminCert, main.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{
		"client signed by etcd's CA":    client.CheckSignatureFrom(etcdCA) == nil,
		"server signed by etcd's CA":    server.CheckSignatureFrom(etcdCA) == nil,
		"admin signed by etcd's CA":     admin.CheckSignatureFrom(etcdCA) == nil,
		"client signed by the API's CA": client.CheckSignatureFrom(apiCA) == nil,
		"server serves and dials":       len(server.ExtKeyUsage) == 2 && server.ExtKeyUsage[1] == x509.ExtKeyUsageClientAuth,
		"client's name":                 client.Subject.CommonName == EtcdClientName,
	}
	want := map[string]bool{"client signed by etcd's CA": true, "server signed by etcd's CA": true, "admin signed by etcd's CA": false,
		"client signed by the API's CA": false, "server serves and dials": true, "client's name": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, k := range []string{f.CAKey, f.ServerKey, f.ClientKey, f.Dir} {
		st, err := os.Stat(k)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s mode %v: readable by others", k, st.Mode().Perm())
		}
	}
	before, _ := os.ReadFile(f.ClientCert)
	if _, err := EnsureEtcd(f.Dir); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(f.ClientCert)
	if string(before) != string(after) {
		t.Error("a second EnsureEtcd replaced a valid client certificate")
	}
}
