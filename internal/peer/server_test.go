package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine/admit"
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
	cfg, err := TLS(f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Listen(ctx, "127.0.0.1:0", cfg, &Server{Handle: admit.NewHandle()})
	if err != nil {
		t.Fatal(err)
	}
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
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
		resp, err := c.Post("https://"+addr.String()+CreatePath, "application/json", strings.NewReader(`{"claims":[]}`))
		if err != nil {
			return 0, err
		}
		defer func() { _ = resp.Body.Close() }()
		return resp.StatusCode, nil
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
	taken := &admit.NameTakenError{Claim: "ns/c", Policy: "p", By: "a stored ResourceClaim"}
	for name, tc := range map[string]struct {
		err  error
		want func(error) bool
	}{
		"name taken": {taken, func(err error) bool {
			var got *admit.NameTakenError
			return errors.As(err, &got) && *got == *taken
		}},
		"not the leader": {admit.ErrNotLeader, func(err error) bool { return errors.Is(err, admit.ErrNotLeader) }},
		"busy":           {admit.ErrBusy, func(err error) bool { return errors.Is(err, admit.ErrBusy) }},
		"other":          {errors.New("boom"), func(err error) bool { return err.Error() == "boom" }},
	} {
		t.Run(name, func(t *testing.T) {
			if got := errorOf(tc.err).err(); !tc.want(got) {
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
	f, err := pki.Ensure(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TLS(f)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := Listen(t.Context(), "127.0.0.2:0", cfg, &Server{Handle: admit.NewHandle()})
	if err != nil {
		t.Fatalf("listening on 127.0.0.2 (loopback on Linux): %v", err)
	}
	c, err := NewClient(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp Response
	if err := c.post(t.Context(), addr.String(), EndedPath, []byte(`{"session":"s","status":201}`), &resp); err != nil {
		t.Fatalf("a replica at %s, an address its certificate does not name: %v", addr, err)
	}
}
