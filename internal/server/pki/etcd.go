package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
)

// EtcdFiles are the certificates of the embedded etcd: a CA of its own (so
// that no certificate the API server's CA signs, the admin's included, opens
// etcd), etcd's serving and peer certificate, and the one client certificate
// serve's API server and quota engine use. Keys are readable by their owner
// only.
type EtcdFiles struct {
	Dir           string
	CACert, CAKey string
	ServerCert    string
	ServerKey     string
	ClientCert    string
	ClientKey     string
}

// EtcdClientName is the common name of serve's etcd client certificate.
const EtcdClientName = "quotaplane-etcd-client"

// EtcdFilesIn returns the etcd layout under dir.
func EtcdFilesIn(dir string) EtcdFiles {
	return EtcdFiles{
		Dir:        dir,
		CACert:     filepath.Join(dir, "ca.crt"),
		CAKey:      filepath.Join(dir, "ca.key"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
}

// EnsureEtcd creates whatever is missing under dir. The serving certificate
// covers the loopback addresses etcd listens on, for clients and its peer.
func EnsureEtcd(dir string) (EtcdFiles, error) {
	f := EtcdFilesIn(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return f, err
	}
	caCert, caKey, err := ensureCAAt(dir, f.CACert, f.CAKey, "quotaplane-etcd-ca")
	if err != nil {
		return f, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	if err := ensureLeaf(f.ServerCert, f.ServerKey, caCert, caKey, func(c *x509.Certificate) bool {
		return slices.ContainsFunc(c.IPAddresses, ips[0].Equal) && slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}, &x509.Certificate{
		Subject: pkix.Name{CommonName: "quotaplane-etcd"},
		// The peer listener presents it as a server and, dialing itself,
		// as a client.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
		DNSNames:    []string{"localhost"},
	}); err != nil {
		return f, err
	}
	if err := ensureLeaf(f.ClientCert, f.ClientKey, caCert, caKey, func(*x509.Certificate) bool { return true }, &x509.Certificate{
		Subject:     pkix.Name{CommonName: EtcdClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return f, err
	}
	return f, nil
}
