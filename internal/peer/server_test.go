package peer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/peer/wire"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// TestOnlyReplicasReachThePeerListener: the listener answers a client
// certificate of the peer CA with the replicas' group, and no one else — not
// a caller without a certificate, not the API's admin certificate (its CA
// signs every API client certificate, system:masters included), not a
// certificate of another replica set's peer CA.
func TestOnlyReplicasReachThePeerListener(t *testing.T) {
	dir := t.TempDir()
	f, err := pki.Ensure(filepath.Join(dir, "a"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Ensure(filepath.Join(dir, "other"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := listenWith(t, f, "127.0.0.1")
	call := func(t *testing.T, certFile, keyFile string) (int, error) {
		pool, _, err := load(f)
		if err != nil {
			t.Fatal(err)
		}
		tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		return createAs(addr, tc)
	}
	for name, tc := range map[string][2]string{
		"no certificate":                         {"", ""},
		"the API's admin (system:masters)":       {f.AdminCert, f.AdminKey},
		"another replica set's peer certificate": {other.PeerCert, other.PeerKey},
	} {
		t.Run(name, func(t *testing.T) {
			if code, err := call(t, tc[0], tc[1]); err == nil {
				t.Errorf("answered %d; want the TLS handshake refused", code)
			}
		})
	}
	t.Run("a certificate of the peer CA without the replicas' Organization", func(t *testing.T) {
		cert, key := signedByPeerCA(t, f, pkix.Name{CommonName: pki.PeerServerName, Organization: []string{"quotaplane:members"}})
		if code, err := call(t, cert, key); err != nil || code != http.StatusForbidden {
			t.Errorf("answered %d, %v; want 403 (the handshake succeeds: the CA signed it, but it is no replica's)", code, err)
		}
	})
	t.Run("a replica", func(t *testing.T) {
		if code, err := call(t, f.PeerCert, f.PeerKey); err != nil || code != http.StatusOK {
			t.Fatalf("a replica's call: %d, %v; want 200", code, err)
		}
	})
}

// TestAFollowerGetsTheLeadersErrors: the client turns the leader's answer
// back into the error the leader's own admission got; a replica that does
// not lead either is "not the leader", retryable, never fail-open.
func TestAFollowerGetsTheLeadersErrors(t *testing.T) {
	taken := &route.NameTakenError{Claim: "ns/c", Policy: "p", By: "a stored ResourceClaim"}
	for name, tc := range map[string]struct {
		err  error
		want func(error) bool
	}{
		"name taken": {taken, func(err error) bool {
			var got *route.NameTakenError
			return errors.As(err, &got) && *got == *taken
		}},
		"not the leader": {route.ErrNotLeader, func(err error) bool { return errors.Is(err, route.ErrNotLeader) }},
		"busy":           {route.ErrBusy, func(err error) bool { return errors.Is(err, route.ErrBusy) }},
		"other":          {errors.New("boom"), func(err error) bool { return err.Error() == "boom" }},
	} {
		t.Run(name, func(t *testing.T) {
			if got := errOf(errorOf(tc.err)); !tc.want(got) {
				t.Errorf("%v came back as %v", tc.err, got)
			}
		})
	}
	if errorOf(nil) != nil {
		t.Error("no error came back as one")
	}
}

// TestAReplicaIsReachedAtAnyAdvertisedAddress: the follower's client verifies
// the leader as a replica (peer CA, the replicas' name), not as the address
// it advertises: a leader whose certificate names only loopback is reached
// at another address of the host (here 127.0.0.2, which it does not name).
func TestAReplicaIsReachedAtAnyAdvertisedAddress(t *testing.T) {
	f, _, addr := replica(t, "127.0.0.2")
	c, err := NewClient(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp wire.Response
	if err := c.post(t.Context(), addr, EndedPath, wire.Version, []byte(`{"session":"s","status":201}`), &resp); err != nil {
		t.Fatalf("a replica at %s, an address its certificate does not name: %v", addr, err)
	}
}

// TestAForwardedCallIsNeverForwardedAgain: a replica that does not lead
// answers a call another replica forwarded to it "not the leader" at once,
// on every path, rather than forwarding it on. Here the replica's own
// forwarder points back at itself, as two replicas that each believe the
// other leads during a failover would: a call forwarded again would bounce
// until its deadline.
func TestAForwardedCallIsNeverForwardedAgain(t *testing.T) {
	f, h, addr := replica(t, "127.0.0.1")
	// The resolver names this replica itself as the leader (seeded: no
	// Lease is read within resolvedFor of it).
	leader := &Resolver{Self: "other", address: addr, at: time.Now().Add(time.Hour)}
	c, err := NewClient(f, leader)
	if err != nil {
		t.Fatal(err)
	}
	h.ForwardTo(c)
	for path, body := range map[string]string{
		CreatePath: `{"session":"s1","claims":[]}`,
		UpdatePath: `{"session":"s2","object":{},"changes":[]}`,
		BudgetPath: `{"session":"s3","grant":null}`,
		ReviewPath: `{"steps":[]}`,
	} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*attemptTimeout)
			defer cancel()
			start := time.Now()
			var resp wire.Response
			err := c.post(ctx, addr, path, wire.Version, []byte(body), &resp)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("after %s: %v; want the answer \"not the leader\"", took, err)
			}
			if resp.Error == nil || resp.Error.Kind != wire.ErrorNotLeader {
				t.Fatalf("after %s: answered %+v; want the error kind %q (decided here or refused, never forwarded again)", took, resp.Error, wire.ErrorNotLeader)
			}
		})
	}
}

// signedByPeerCA writes a client certificate with subject, signed by the
// peer CA of f, and returns its certificate and key files.
func signedByPeerCA(t *testing.T, f pki.Files, subject pkix.Name) (string, string) {
	t.Helper()
	ca, err := tls.LoadX509KeyPair(f.PeerCACert, f.PeerCAKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: subject, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// replica serves a peer listener on host with a PKI of its own and a
// handle that leads nothing; it returns the PKI, the handle and the
// listener's address.
func replica(t *testing.T, host string) (pki.Files, *route.Handle, string) {
	t.Helper()
	f, err := pki.Ensure(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, addr := listenWith(t, f, host)
	return f, h, addr
}

// listenWith serves a peer listener on host with the PKI f until the test
// ends, and returns its handle (leading nothing) and address.
func listenWith(t *testing.T, f pki.Files, host string) (*route.Handle, string) {
	t.Helper()
	cfg, err := TLS(f)
	if err != nil {
		t.Fatal(err)
	}
	h := route.NewHandle()
	addr, err := Listen(t.Context(), host+":0", cfg, &Server{Handle: h})
	if err != nil {
		t.Fatalf("listening on %s: %v", host, err)
	}
	return h, addr.String()
}

// createAs posts an empty create to the peer listener at addr with the TLS
// configuration tc, and returns the answer's status.
func createAs(addr string, tc *tls.Config) (int, error) {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
	resp, err := c.Post("https://"+addr+CreatePath, "application/json", strings.NewReader(`{"claims":[]}`))
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, nil
}
