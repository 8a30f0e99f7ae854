package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/server"
	"github.com/quotaplane/quotaplane/internal/server/etcd"
	"github.com/quotaplane/quotaplane/internal/server/pki"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// bannerWriter closes ready when serve prints its banner.
type bannerWriter struct{ ready chan struct{} }

func (w bannerWriter) Write(p []byte) (int, error) {
	close(w.ready)
	return len(p), nil
}

// TestExternalEtcdWithTLS serves from an external etcd that requires client
// certificates, with --etcd-cafile, --etcd-certfile and --etcd-keyfile. A
// Secret created under a ClaimCreationPolicy of limit 1 is stored and read
// back through the API server's storage, and its grant is written by the
// quota engine's own etcd client; a second Secret is denied.
func TestExternalEtcdWithTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the server")
	}
	dir := t.TempDir()
	// A throwaway CA: its serving certificate (127.0.0.1) is etcd's, its
	// client certificate is the one serve presents.
	certs, err := pki.Ensure(filepath.Join(dir, "etcd-pki"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	etcdConfig, err := etcd.Options{
		Dir:           filepath.Join(dir, "etcd"),
		UnsafeNoFsync: true,
		ClientTLS:     &etcd.ClientTLS{CertFile: certs.ServingCert, KeyFile: certs.ServingKey, ClientCAFile: certs.CACert},
	}.Complete()
	if err != nil {
		t.Fatal(err)
	}
	etcdServer, err := etcdConfig.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer etcdServer.Stop()
	if !strings.HasPrefix(etcdServer.ClientURL(), "https://") {
		t.Fatalf("etcd serves at %s; want https", etcdServer.ClientURL())
	}
	if err := getWithoutClientCert(etcdServer.ClientURL(), certs.CACert); err == nil {
		t.Fatal("etcd answered a client without a certificate; the test would prove nothing")
	}

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := server.NewOptions()
	o.DataDir = filepath.Join(dir, "data")
	o.Listener = listener
	o.EtcdServers = []string{etcdServer.ClientURL()}
	o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = certs.CACert, certs.AdminCert, certs.AdminKey
	engineOpts := quotatest.FastEngineOptions()
	engineOpts.Handle = route.NewHandle()
	o.QuotaEngine, o.SystemNamespace = engineOpts.Handle, engineOpts.SystemNamespace

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	banner := bannerWriter{ready: make(chan struct{})}
	began := time.Now()
	go func() { served <- server.Serve(ctx, o, []server.Component{engine.Start(engineOpts)}, banner) }()
	defer func() {
		cancel()
		if err := <-served; err != nil && ctx.Err() == nil {
			t.Errorf("serve: %v", err)
		}
	}()
	select {
	case <-banner.ready:
		t.Logf("ready after %s", time.Since(began).Round(time.Millisecond))
	case err := <-served:
		t.Fatalf("serve stopped before it was ready: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("serve was not ready within 2 minutes")
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(o.DataDir, "admin.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	c := quotatest.NewClient(t, cfg)
	f := quotatest.NewFixture(t, c)
	f.SecretsPolicy(1)

	want := map[string][]byte{"k": []byte("v")}
	if err := createAdmitted(c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: f.NS}, Data: want}); err != nil {
		t.Fatalf("creating the first Secret: %v", err)
	}
	got := &corev1.Secret{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: f.NS, Name: "first"}, got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["k"]) != "v" {
		t.Errorf("read back data %q; want %q", got.Data, want)
	}
	err = c.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: f.NS}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Insufficient quota resources available") {
		t.Fatalf("second Secret: %v; want a quota denial", err)
	}
}

// createAdmitted creates obj, retrying while the engine has not taken its
// first term yet (admission answers that no replica decides).
func createAdmitted(c client.Client, obj client.Object) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.Create(context.Background(), obj)
		if apierrors.IsAlreadyExists(err) { // stored by an attempt answered as failed
			return nil
		}
		if err == nil || apierrors.IsForbidden(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// getWithoutClientCert reads from etcd trusting its CA but presenting no
// client certificate.
func getWithoutClientCert(endpoint, caFile string) error {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return fmt.Errorf("no certificate in %s", caFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: &tls.Config{RootCAs: roots}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Get(ctx, "/")
	return err
}
