package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var extraIP = net.ParseIP("10.0.0.7")

// issueServing writes, with the CA under dir, a serving certificate valid
// for validFor.
func issueServing(t *testing.T, f Files, validFor time.Duration) {
	t.Helper()
	ca, caKey, err := load(f.CACert, f.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "quotaplane-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validFor),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, extraIP}, DNSNames: []string{"localhost", "quota.example.com"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKey(f.ServingKey, key); err != nil {
		t.Fatal(err)
	}
	if err := writeCert(f.ServingCert, der); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, f Files) map[string]string {
	t.Helper()
	got := map[string]string{}
	for name, path := range map[string]string{"ca": f.CACert, "serving": f.ServingCert, "admin": f.AdminCert, "service-account": f.ServiceAcctKey} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		got[name] = string(b)
	}
	return got
}

func TestEnsureAgain(t *testing.T) {
	cases := map[string]struct {
		// between changes the directory after a first Ensure.
		between  func(t *testing.T, f Files)
		ips      []net.IP
		dnsNames []string
		// wantReplaced are the files the second Ensure replaced.
		wantReplaced []string
		wantErr      bool
	}{
		"nothing changed": {
			ips: []net.IP{extraIP}, dnsNames: []string{"quota.example.com"},
		},
		"a new address to serve": {
			ips: []net.IP{extraIP, net.ParseIP("192.0.2.1")}, dnsNames: []string{"quota.example.com"}, wantReplaced: []string{"serving"},
		},
		"a new name to serve": {
			ips: []net.IP{extraIP}, dnsNames: []string{"quota.example.com", "quota.internal"}, wantReplaced: []string{"serving"},
		},
		"fewer addresses: the certificate still covers them": {},
		"the serving certificate is about to expire": {
			between: func(t *testing.T, f Files) { issueServing(t, f, 10*24*time.Hour) },
			ips:     []net.IP{extraIP}, dnsNames: []string{"quota.example.com"}, wantReplaced: []string{"serving"},
		},
		"the serving certificate has long to live": {
			between: func(t *testing.T, f Files) { issueServing(t, f, 90*24*time.Hour) },
			ips:     []net.IP{extraIP}, dnsNames: []string{"quota.example.com"},
		},
		"the admin certificate is missing": {
			between: func(t *testing.T, f Files) { _ = os.Remove(f.AdminCert) },
			ips:     []net.IP{extraIP}, dnsNames: []string{"quota.example.com"}, wantReplaced: []string{"admin"},
		},
		"a new CA: every certificate is issued again": {
			between: func(t *testing.T, f Files) { _ = os.Remove(f.CACert); _ = os.Remove(f.CAKey) },
			ips:     []net.IP{extraIP}, dnsNames: []string{"quota.example.com"}, wantReplaced: []string{"admin", "ca", "serving"},
		},
		"a damaged CA is not overwritten": {
			between: func(t *testing.T, f Files) { _ = os.WriteFile(f.CACert, []byte("not PEM"), 0o644) },
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f, err := Ensure(dir, []net.IP{extraIP}, []string{"quota.example.com"})
			if err != nil {
				t.Fatal(err)
			}
			if tc.between != nil {
				tc.between(t, f)
			}
			var before map[string]string
			if !tc.wantErr {
				before = readSome(f)
			}
			_, err = Ensure(dir, tc.ips, tc.dnsNames)
			if (err != nil) != tc.wantErr {
				t.Fatalf("second Ensure: %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if b, _ := os.ReadFile(f.CACert); string(b) != "not PEM" {
					t.Error("the damaged CA was overwritten")
				}
				return
			}
			after := read(t, f)
			var replaced []string
			for k, v := range after {
				if before[k] != v {
					replaced = append(replaced, k)
				}
			}
			slices.Sort(replaced)
			if diff := cmp.Diff(tc.wantReplaced, replaced); diff != "" {
				t.Errorf("replaced (-want +got):\n%s", diff)
			}
			checkIssued(t, f, append(tc.ips, extraIP), tc.dnsNames)
		})
	}
}

// readSome reads what exists, for a directory a case may have damaged.
func readSome(f Files) map[string]string {
	got := map[string]string{}
	for name, path := range map[string]string{"ca": f.CACert, "serving": f.ServingCert, "admin": f.AdminCert, "service-account": f.ServiceAcctKey} {
		b, _ := os.ReadFile(path)
		got[name] = string(b)
	}
	return got
}

// checkIssued checks what serve relies on: every certificate signed by the
// CA, the serving one for every address, the admin one in system:masters,
// private keys readable by their owner only.
func checkIssued(t *testing.T, f Files, ips []net.IP, dnsNames []string) {
	t.Helper()
	ca, _, err := load(f.CACert, f.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	serving, _, err := load(f.ServingCert, f.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	admin, _, err := load(f.AdminCert, f.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*x509.Certificate{"serving": serving, "admin": admin} {
		if err := c.CheckSignatureFrom(ca); err != nil {
			t.Errorf("%s certificate not signed by the CA: %v", name, err)
		}
	}
	for _, ip := range append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...) {
		if err := serving.VerifyHostname(ip.String()); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}
	for _, n := range append([]string{"localhost"}, dnsNames...) {
		if err := serving.VerifyHostname(n); err != nil {
			t.Errorf("serving certificate: %v", err)
		}
	}
	if diff := cmp.Diff(pkix.Name{CommonName: AdminUser, Organization: []string{"system:masters"}}.String(), admin.Subject.String()); diff != "" {
		t.Errorf("admin subject (-want +got):\n%s", diff)
	}
	for _, k := range []string{f.CAKey, f.ServingKey, f.AdminKey, f.ServiceAcctKey} {
		st, err := os.Stat(k)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", k, st.Mode().Perm())
		}
		b, _ := os.ReadFile(k)
		if blk, _ := pem.Decode(b); blk == nil || blk.Type != "EC PRIVATE KEY" {
			t.Errorf("%s is not a PEM EC private key", k)
		}
	}
}
