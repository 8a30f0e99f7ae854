package pki

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
)

// Certificates reads every CERTIFICATE block of the PEM file at path, in
// order. A CA file may hold a bundle: every certificate in it is trusted,
// and the first is the one that signs (its key is the CA key file), which
// is how the peer CA is rotated without a moment when two replicas refuse
// each other (docs/operations.md, "Rotating the peer CA").
func Certificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of %s: %w", len(certs)+1, path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return certs, nil
}

// Fingerprint is the hex SHA-256 of cert's DER, as `openssl x509
// -fingerprint -sha256` shows it without the colons.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// matches reports whether key is the private key of cert.
func matches(cert *x509.Certificate, key crypto.Signer) bool {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(cert.PublicKey)
}
