package hardening

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
)

// TestTheEmbeddedEtcdAcceptsOnlyServe: serve's etcd holds the claims, the
// journal and the ledger; any local process reaching its loopback port could
// write them around every check. It accepts only serve's client certificate:
// a plain client, a TLS client without a certificate, and one holding the
// admin's certificate (signed by the API server's CA) can neither read nor
// write; serve's own credentials can.
func TestTheEmbeddedEtcdAcceptsOnlyServe(t *testing.T) {
	loc, err := formats.ReadEtcdFile(srv.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loc.Servers) != 1 || !strings.HasPrefix(loc.Servers[0], "https://127.0.0.1:") {
		t.Fatalf("the embedded etcd listens at %v; want one https:// loopback URL", loc.Servers)
	}
	if loc.CAFile == "" || loc.CertFile == "" || loc.KeyFile == "" {
		t.Fatalf("serve recorded no etcd credentials: %+v", loc)
	}
	for _, f := range []string{loc.KeyFile, filepath.Join(filepath.Dir(loc.CAFile), "ca.key")} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is readable by others (%v)", f, st.Mode().Perm())
		}
	}
	roots := x509.NewCertPool()
	ca, err := os.ReadFile(loc.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots.AppendCertsFromPEM(ca)
	admin, err := tls.LoadX509KeyPair(filepath.Join(srv.DataDir, "pki", "admin.crt"), filepath.Join(srv.DataDir, "pki", "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	plain := strings.Replace(loc.Servers[0], "https://", "http://", 1)
	strangers := map[string]clientv3.Config{
		"plain, no TLS":           {Endpoints: []string{plain}},
		"TLS, no certificate":     {Endpoints: loc.Servers, TLS: &tls.Config{RootCAs: roots}},
		"the admin's certificate": {Endpoints: loc.Servers, TLS: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}}},
	}
	key := "/registry/quota.miloapis.com/resourceclaims/intruder/forged"
	for name, cfg := range strangers {
		t.Run(name, func(t *testing.T) {
			cfg.DialTimeout, cfg.Logger = 2*time.Second, zap.NewNop()
			c, err := clientv3.New(cfg)
			if err != nil {
				return // refused at once
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := c.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err == nil {
				t.Error("read etcd")
			}
			if _, err := c.Put(ctx, key, "{}"); err == nil {
				t.Error("wrote etcd")
			}
		})
	}
	own, err := srv.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := own.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		t.Errorf("serve's own credentials cannot read etcd: %v", err)
	}
}
