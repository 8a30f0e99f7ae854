package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// stuckCache is a quota-plane cache that never reads anything: Start fails
// with startErr at once, or, without one, runs until its context ends.
type stuckCache struct {
	crcache.Cache // what the start does not call
	startErr      error
}

func (c *stuckCache) Start(ctx context.Context) error {
	if c.startErr != nil {
		return c.startErr
	}
	<-ctx.Done()
	return nil
}

func (c *stuckCache) GetInformer(ctx context.Context, _ client.Object, _ ...crcache.InformerGetOption) (crcache.Informer, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (c *stuckCache) WaitForCacheSync(ctx context.Context) bool {
	<-ctx.Done()
	return false
}

// TestQuotaCacheStartFailsClearly: a cache that cannot start, or does not
// read the quota plane in time, ends the start with an error that says what
// and what to check, within its bound; a shutdown while starting is not an
// error.
func TestQuotaCacheStartFailsClearly(t *testing.T) {
	cases := map[string]struct {
		cache   *stuckCache
		timeout time.Duration
		cancel  bool     // the webhook shuts down while starting
		want    []string // in the error; none: no error
	}{
		"start fails": {cache: &stuckCache{startErr: errors.New("informer already started")}, timeout: time.Hour,
			want: []string{"starting the cache: informer already started", "could not be read", "--quota-kubeconfig /etc/quota.kubeconfig", "https://quota.example.com", "quotaplane-member-webhook"}},
		"never read": {cache: &stuckCache{}, timeout: 50 * time.Millisecond,
			want: []string{"not read within --quota-sync-timeout (50ms)", "cluster east's ResourceClaims"}},
		"shut down while starting": {cache: &stuckCache{}, timeout: time.Hour, cancel: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			o.ClusterName, o.QuotaKubeconfig, o.QuotaSyncTimeout = "east", "/etc/quota.kubeconfig", tc.timeout
			w := &Webhook{opts: o, quotaCache: tc.cache, quotaConfig: &rest.Config{Host: "https://quota.example.com"}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			done := make(chan error, 1)
			go func() { done <- w.startQuotaCache(ctx) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the start did not return within 10s: its error is lost, or its wait unbounded")
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("startQuotaCache() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("startQuotaCache() = nil, want an error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestRunExitsWhenTheQuotaPlaneCannotBeRead: the webhook, started against a
// quota plane it cannot read, exits within --quota-sync-timeout with an
// error naming the quota plane and the flag to check, instead of serving
// unready forever.
func TestRunExitsWhenTheQuotaPlaneCannotBeRead(t *testing.T) {
	cases := map[string]struct {
		quotaPlane func(t *testing.T) string // its address
		want       string                    // what the error says of it
	}{
		"refuses connections": {quotaPlane: func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			_ = ln.Close()
			return addr
		}, want: "connection refused"},
		"accepts and never answers": {quotaPlane: func(t *testing.T) string {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var conns []net.Conn
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}()
			t.Cleanup(func() {
				_ = ln.Close()
				mu.Lock()
				defer mu.Unlock()
				for _, c := range conns {
					_ = c.Close()
				}
			})
			return ln.Addr().String()
		}, want: "not read within --quota-sync-timeout (1s)"},
		// The quota kinds are served, but the webhook's identity may not
		// list them: the cache starts and is never read.
		"forbids reading the policies and claims": {quotaPlane: func(t *testing.T) string {
			srv := httptest.NewTLSServer(forbiddingQuotaPlane(t))
			t.Cleanup(srv.Close)
			return srv.Listener.Addr().String()
		}, want: "not read within --quota-sync-timeout (1s)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			addr := tc.quotaPlane(t)
			dir := t.TempDir()
			kubeconfig := filepath.Join(dir, "quota.kubeconfig")
			if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: quota
  cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}
users:
- name: webhook
  user: {token: t}
contexts:
- name: quota
  context: {cluster: quota, user: webhook}
current-context: quota
`), 0o600); err != nil {
				t.Fatal(err)
			}
			o := NewOptions()
			o.QuotaKubeconfig, o.Kubeconfig, o.ClusterName = kubeconfig, kubeconfig, "east"
			o.BindAddress, o.SecurePort, o.CertDir = "127.0.0.1", 0, filepath.Join(dir, "certs")
			o.QuotaSyncTimeout = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- Run(ctx, o) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Run() = nil, want an error")
				}
				for _, want := range []string{"could not be read", tc.want, "--quota-kubeconfig " + kubeconfig, "https://" + addr} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the webhook still runs 20s after its 1s --quota-sync-timeout")
			}
		})
	}
}

// forbiddingQuotaPlane serves the discovery of the quota kinds and refuses
// everything else, as a quota plane does to an identity without
// quotaplane-member-webhook.
func forbiddingQuotaPlane(t *testing.T) http.Handler {
	gv := quotav1alpha1.SchemeGroupVersion
	discovery := map[string]any{
		"/api": &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}},
		"/apis": &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{{
			Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: gv.String(), Version: gv.Version}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}}}},
		"/apis/" + gv.String(): &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String(), APIResources: []metav1.APIResource{
			{Name: "resourceclaims", SingularName: "resourceclaim", Namespaced: true, Kind: "ResourceClaim", Verbs: metav1.Verbs{"get", "list", "watch", "delete"}},
			{Name: "claimcreationpolicies", SingularName: "claimcreationpolicy", Kind: "ClaimCreationPolicy", Verbs: metav1.Verbs{"get", "list", "watch"}},
		}},
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		body, ok := discovery[r.URL.Path]
		if !ok {
			rw.WriteHeader(http.StatusForbidden)
			body = &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
				Message: fmt.Sprintf("user %q cannot %s %s", "webhook", r.Method, r.URL.Path)}
		}
		if err := json.NewEncoder(rw).Encode(body); err != nil {
			t.Error(err)
		}
	})
}
