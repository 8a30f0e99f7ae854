package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/quotaplane/quotaplane/internal/server/pki"
)

func TestStart(t *testing.T) {
	cases := map[string]struct {
		tls              bool
		quotaBackend     int64
		wantScheme       string
		wantQuotaBackend int64
	}{
		"plain, default database size": {wantScheme: "http", wantQuotaBackend: 8 << 30},
		"TLS with client certificates": {tls: true, quotaBackend: 1 << 30, wantScheme: "https", wantQuotaBackend: 1 << 30},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Dir: dir + "/etcd", UnsafeNoFsync: true, QuotaBackendBytes: tc.quotaBackend}
			var certs pki.Files
			if tc.tls {
				var err error
				if certs, err = pki.Ensure(dir+"/pki", nil, nil); err != nil {
					t.Fatal(err)
				}
				o.ClientTLS = &ClientTLS{CertFile: certs.ServingCert, KeyFile: certs.ServingKey, ClientCAFile: certs.CACert}
			}
			cfg, err := o.Complete()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := cfg.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					s.Stop()
				}
			}()

			type started struct {
				Scheme, Host string
				SameURL      bool
				QuotaBackend int64
			}
			scheme, hostPort, _ := strings.Cut(s.ClientURL(), "://")
			host, _, _ := strings.Cut(hostPort, ":")
			got := started{Scheme: scheme, Host: host, SameURL: s.ClientURL() == cfg.ClientURL(), QuotaBackend: s.etcd.Config().QuotaBackendBytes}
			want := started{Scheme: tc.wantScheme, Host: "127.0.0.1", SameURL: true, QuotaBackend: tc.wantQuotaBackend}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("etcd (-want +got):\n%s", diff)
			}

			// A client that presents what serve presents can write and read.
			var clientTLS *tls.Config
			if tc.tls {
				info := transport.TLSInfo{TrustedCAFile: certs.CACert, CertFile: certs.AdminCert, KeyFile: certs.AdminKey}
				if clientTLS, err = info.ClientConfig(); err != nil {
					t.Fatal(err)
				}
			}
			if err := putGet(ctx, s.ClientURL(), clientTLS); err != nil {
				t.Errorf("with the client certificate: %v", err)
			}
			if tc.tls {
				// Without a client certificate, etcd refuses the connection.
				info := transport.TLSInfo{TrustedCAFile: certs.CACert}
				anonymous, err := info.ClientConfig()
				if err != nil {
					t.Fatal(err)
				}
				short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
				defer cancelShort()
				if err := putGet(short, s.ClientURL(), anonymous); err == nil {
					t.Error("a client without a certificate could write")
				}
			}

			// Stop releases the data directory: etcd starts again on it.
			s.Stop()
			stopped = true
			again, err := o.Complete()
			if err != nil {
				t.Fatal(err)
			}
			s2, err := again.Start(ctx)
			if err != nil {
				t.Fatalf("starting again on the same directory: %v", err)
			}
			s2.Stop()
		})
	}
}

func putGet(ctx context.Context, url string, tlsConfig *tls.Config) error {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: tlsConfig, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Put(ctx, "/test/k", "v"); err != nil {
		return err
	}
	r, err := c.Get(ctx, "/test/k")
	if err != nil {
		return err
	}
	if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		return fmt.Errorf("read back %v, want the value written", r.Kvs)
	}
	return nil
}

// TestAPortTakenBeforeStartIsChosenAgain takes the client and peer ports
// Complete chose before Start listens on them (as another process on the
// machine may): Start chooses others and serves there, instead of failing
// with "address already in use".
func TestAPortTakenBeforeStartIsChosenAgain(t *testing.T) {
	cfg, err := Options{Dir: t.TempDir() + "/etcd", UnsafeNoFsync: true}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	taken := cfg.ClientURL()
	for _, host := range []string{cfg.clientURL.Host, cfg.peerURL.Host} {
		l, err := net.Listen("tcp", host)
		if err != nil {
			t.Fatalf("taking %s: %v", host, err)
		}
		t.Cleanup(func() { l.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := cfg.Start(ctx)
	if err != nil {
		t.Fatalf("starting etcd after its chosen ports were taken: %v", err)
	}
	defer s.Stop()
	if s.ClientURL() == taken {
		t.Fatalf("etcd serves at %s, the address that was taken", taken)
	}
	if err := putGet(ctx, s.ClientURL(), nil); err != nil {
		t.Fatalf("etcd at %s: %v", s.ClientURL(), err)
	}
}
