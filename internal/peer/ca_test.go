package peer

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// twoPeerCAs makes two replicas' material with different peer CAs, and a
// bundle file holding both CAs (first's first).
func twoPeerCAs(t *testing.T) (first, second pki.Files, bundle string) {
	t.Helper()
	dir := t.TempDir()
	first, err := pki.Ensure(filepath.Join(dir, "first"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err = pki.Ensure(filepath.Join(dir, "second"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	bundle = filepath.Join(dir, "bundle.crt")
	writeBundle(t, bundle, first.PeerCACert, second.PeerCACert)
	return first, second, bundle
}

// writeBundle concatenates the PEM files from into to.
func writeBundle(t *testing.T, to string, from ...string) {
	t.Helper()
	var b []byte
	for _, f := range from {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, data...)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestABundleTrustsEachOfItsCAs: a peer-ca.crt holding several CAs (the
// peer CA's rotation) makes the listener accept a replica whose certificate
// any of them signed, and a follower accept a leader signed by any of them;
// with the first CA alone, a certificate of the second is refused.
func TestABundleTrustsEachOfItsCAs(t *testing.T) {
	first, second, bundle := twoPeerCAs(t)
	withBundle := first
	withBundle.PeerCACert = bundle

	// call posts to a listener serving server's material, as a replica
	// presenting client's peer certificate and trusting client's peer CA
	// file.
	call := func(t *testing.T, server, client pki.Files) (int, error) {
		t.Helper()
		_, addr := listenWith(t, server, "127.0.0.1")
		pool, cert, err := load(client)
		if err != nil {
			t.Fatal(err)
		}
		return createAs(addr, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: pki.PeerServerName, MinVersion: tls.VersionTLS13})
	}
	// A replica of the second CA that trusts the first one too.
	secondTrustingFirst := second
	secondTrustingFirst.PeerCACert = filepath.Join(t.TempDir(), "second-first.crt")
	writeBundle(t, secondTrustingFirst.PeerCACert, second.PeerCACert, first.PeerCACert)

	t.Run("the listener's bundle holds the client's CA", func(t *testing.T) {
		if code, err := call(t, withBundle, secondTrustingFirst); err != nil || code != http.StatusOK {
			t.Fatalf("a replica signed by the bundle's second CA: %d, %v; want 200", code, err)
		}
	})
	t.Run("the follower's bundle holds the leader's CA", func(t *testing.T) {
		if code, err := call(t, secondTrustingFirst, withBundle); err != nil || code != http.StatusOK {
			t.Fatalf("a leader signed by the bundle's second CA: %d, %v; want 200", code, err)
		}
	})
	t.Run("the first CA alone refuses the second's certificate", func(t *testing.T) {
		if code, err := call(t, first, secondTrustingFirst); err == nil {
			t.Fatalf("answered %d; want the TLS handshake refused", code)
		}
	})
}

// TestReadCA: a replica announces the CA that signed its peer certificate,
// wherever it stands in its bundle, and every CA of the bundle, in order,
// by the SHA-256 of its DER.
func TestReadCA(t *testing.T) {
	first, second, _ := twoPeerCAs(t)
	fingerprint := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(data)
		sum := sha256.Sum256(b.Bytes)
		return hex.EncodeToString(sum[:])
	}
	fp1, fp2 := fingerprint(first.PeerCACert), fingerprint(second.PeerCACert)
	secondFirst := first
	secondFirst.PeerCACert = filepath.Join(t.TempDir(), "bundle.crt")
	writeBundle(t, secondFirst.PeerCACert, second.PeerCACert, first.PeerCACert)
	for name, tc := range map[string]struct {
		files pki.Files
		want  CA
	}{
		"one CA":                        {first, CA{Signer: fp1, Trust: []string{fp1}}},
		"signed by the bundle's second": {secondFirst, CA{Signer: fp1, Trust: []string{fp2, fp1}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ReadCA(tc.files)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadCA (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("signed by none", func(t *testing.T) {
		other := second
		other.PeerCert, other.PeerKey = first.PeerCert, first.PeerKey
		if _, err := ReadCA(other); err == nil || !strings.Contains(err.Error(), other.PeerCert) {
			t.Errorf("ReadCA = %v; want an error naming %s", err, other.PeerCert)
		}
	})
}

func TestReaches(t *testing.T) {
	for name, tc := range map[string]struct {
		own, leader CA
		want        bool
	}{
		"one CA":                         {CA{"a", []string{"a"}}, CA{"a", []string{"a"}}, true},
		"another CA":                     {CA{"b", []string{"b"}}, CA{"a", []string{"a"}}, false},
		"rotating: both trust both":      {CA{"b", []string{"b", "a"}}, CA{"a", []string{"a", "b"}}, true},
		"the leader does not trust mine": {CA{"b", []string{"b", "a"}}, CA{"a", []string{"a"}}, false},
		"I do not trust the leader's":    {CA{"b", []string{"b"}}, CA{"a", []string{"a", "b"}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.own.Reaches(tc.leader); got != tc.want {
				t.Errorf("Reaches = %t; want %t", got, tc.want)
			}
			if got := tc.leader.Reaches(tc.own); got != tc.want {
				t.Errorf("Reaches, the other way = %t; want %t", got, tc.want)
			}
		})
	}
}

// TestCACheckLogsOncePerChange: the check fails while the CAs disagree and
// says so in one log line when they start to (or disagree differently),
// one when they agree again, and nothing while nothing changes.
func TestCACheckLogsOncePerChange(t *testing.T) {
	var lines []string
	ctx := klog.NewContext(context.Background(), funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
	files := pki.FilesIn("/data/pki")
	own := CA{Signer: "b", Trust: []string{"b"}}
	mismatch := func(leader string) *caMismatch {
		return &caMismatch{leader: leader, theirs: CA{Signer: "a", Trust: []string{"a"}}, own: own, files: files}
	}
	var c CACheck
	for i, step := range []struct {
		set      *caMismatch
		newLines int
	}{
		{nil, 0},
		{mismatch("x"), 1},
		{mismatch("x"), 0},
		{mismatch("x"), 0},
		{mismatch("y"), 1}, // another leader, as far apart
		{nil, 1},
		{nil, 0},
		{mismatch("x"), 1},
	} {
		before := len(lines)
		c.set(ctx, step.set)
		if got := len(lines) - before; got != step.newLines {
			t.Errorf("step %d: %d log lines; want %d: %q", i, got, step.newLines, lines[before:])
		}
		err := c.Check(nil)
		if (err != nil) != (step.set != nil) {
			t.Errorf("step %d: Check = %v; want failing %t", i, err, step.set != nil)
		}
		if err != nil {
			for _, want := range []string{"peer-ca.crt", "peer-ca.key", "/data/pki/peer.crt", "/data/pki/peer.key", "leading replica " + step.set.leader, "signed by a", "signed by the peer CA b"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("step %d: Check = %q; want it to name %q", i, err, want)
				}
			}
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "again") {
			continue // the line saying they agree
		}
		for _, want := range []string{"peer-ca.crt", "peer-ca.key", `"leaderPeerCA"="a"`, `"peerCA"="b"`, `"copyInto"="/data/pki"`} {
			if !strings.Contains(l, want) {
				t.Errorf("log line %q; want it to name %s", l, want)
			}
		}
	}
}
