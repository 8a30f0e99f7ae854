package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files are the paths of the generated material.
type Files struct {
	Dir            string
	CACert         string
	CAKey          string
	ServingCert    string
	ServingKey     string
	AdminCert      string
	AdminKey       string
	ServiceAcctKey string
	// PeerCACert and PeerCAKey sign the certificates replicas present to
	// each other's peer listener (docs/replicas.md); shared by every
	// replica like the CA, and used for nothing else.
	PeerCACert string
	PeerCAKey  string
	// PeerCert and PeerKey are this replica's: serving its peer listener,
	// and as a client of the others'.
	PeerCert string
	PeerKey  string
}

// PeerGroup is the Organization of a replica's peer certificate: the peer
// listener answers only certificates of the peer CA that carry it.
const PeerGroup = "quotaplane:replicas"

// PeerServerName is the name every replica's peer certificate carries and
// every replica verifies: a replica is reached at whatever address it
// advertises (--peer-advertise-address), which its certificate need not
// name; the private peer CA and PeerGroup are what identify a replica.
const PeerServerName = "quotaplane-replica"

// AdminUser is the common name of the admin client certificate.
const AdminUser = "quotaplane-admin"

// renewBefore is how long before expiry a serving or admin certificate is replaced.
const renewBefore = 30 * 24 * time.Hour

// FilesIn returns the file layout under dir.
func FilesIn(dir string) Files {
	return Files{
		Dir:            dir,
		CACert:         filepath.Join(dir, "ca.crt"),
		CAKey:          filepath.Join(dir, "ca.key"),
		ServingCert:    filepath.Join(dir, "apiserver.crt"),
		ServingKey:     filepath.Join(dir, "apiserver.key"),
		AdminCert:      filepath.Join(dir, "admin.crt"),
		AdminKey:       filepath.Join(dir, "admin.key"),
		ServiceAcctKey: filepath.Join(dir, "service-account.key"),
		PeerCACert:     filepath.Join(dir, "peer-ca.crt"),
		PeerCAKey:      filepath.Join(dir, "peer-ca.key"),
		PeerCert:       filepath.Join(dir, "peer.crt"),
		PeerKey:        filepath.Join(dir, "peer.key"),
	}
}

// Ensure creates whatever is missing under dir and returns the layout. The
// serving certificate covers localhost, the loopback addresses and ips.
func Ensure(dir string, ips []net.IP, dnsNames []string) (Files, error) {
	f := FilesIn(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("creating %s: %w", dir, err)
	}
	caCert, caKey, err := ensureCA(f)
	if err != nil {
		return f, err
	}
	ips = append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...)
	dnsNames = append([]string{"localhost"}, dnsNames...)
	if err := ensureLeaf(f.ServingCert, f.ServingKey, caCert, caKey, func(c *x509.Certificate) bool {
		for _, ip := range ips {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		}
		for _, n := range dnsNames {
			if !slices.Contains(c.DNSNames, n) {
				return false
			}
		}
		return true
	}, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "quotaplane-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips,
		DNSNames:    dnsNames,
	}); err != nil {
		return f, err
	}
	if err := ensureLeaf(f.AdminCert, f.AdminKey, caCert, caKey, func(*x509.Certificate) bool { return true }, &x509.Certificate{
		Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return f, err
	}
	peerCA, peerCAKey, err := ensureCAAt(f.Dir, f.PeerCACert, f.PeerCAKey, "quotaplane-peer-ca")
	if err != nil {
		return f, err
	}
	if err := ensureLeaf(f.PeerCert, f.PeerKey, peerCA, peerCAKey, func(c *x509.Certificate) bool {
		for _, ip := range ips {
			if !slices.ContainsFunc(c.IPAddresses, ip.Equal) {
				return false
			}
		}
		return slices.Contains(c.Subject.Organization, PeerGroup) && slices.Contains(c.DNSNames, PeerServerName)
	}, &x509.Certificate{
		Subject:     pkix.Name{CommonName: PeerServerName, Organization: []string{PeerGroup}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: ips,
		DNSNames:    append([]string{PeerServerName}, dnsNames...),
	}); err != nil {
		return f, err
	}
	if _, err := os.Stat(f.ServiceAcctKey); errors.Is(err, os.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return f, err
		}
		if err := writeKey(f.ServiceAcctKey, key); err != nil {
			return f, err
		}
	}
	return f, nil
}

func ensureCA(f Files) (*x509.Certificate, crypto.Signer, error) {
	return ensureCAAt(f.Dir, f.CACert, f.CAKey, "quotaplane-ca")
}

// ensureCAAt returns the CA at certPath and keyPath, made when missing. The
// certificate file may hold a bundle (Certificates): the first certificate
// is the CA that signs, and keyPath must be its key.
func ensureCAAt(dir, certPath, keyPath, commonName string) (*x509.Certificate, crypto.Signer, error) {
	if cert, key, err := load(certPath, keyPath); err == nil {
		if !matches(cert, key) {
			return nil, nil, fmt.Errorf("%s is not the key of the first certificate in %s, the CA that signs: copy both files from one replica, or put the certificate of this key first", keyPath, certPath)
		}
		return cert, key, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("reading the CA in %s: %w (delete the pki directory to start over)", dir, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, err
	}
	if err := writeCert(certPath, der); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// ensureLeaf keeps the certificate at certPath when it is signed by ca, is
// not close to expiry and satisfies ok; otherwise it issues a new one from tmpl.
func ensureLeaf(certPath, keyPath string, ca *x509.Certificate, caKey crypto.Signer, ok func(*x509.Certificate) bool, tmpl *x509.Certificate) error {
	if cert, _, err := load(certPath, keyPath); err == nil {
		if cert.CheckSignatureFrom(ca) == nil && time.Until(cert.NotAfter) > renewBefore && ok(cert) {
			return nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	if err := writeKey(keyPath, key); err != nil {
		return err
	}
	return writeCert(certPath, der)
}

func load(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func writeCert(path string, der []byte) error {
	return writeAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writeAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

// writeAtomic writes through a temporary file and a rename so that a crash
// never leaves a half-written file behind.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
