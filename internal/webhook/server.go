package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/webhook/credential"
)

// Webhook is one running webhook server.
type Webhook struct {
	opts *Options
	ctx  context.Context

	reviewURL   string
	quotaConfig *rest.Config
	quotaHTTP   *http.Client
	// credential is the quota plane's token, refreshed; nil when the
	// credential is not a service-account token.
	credential *credential.Credential
	// quota reads and writes the quota plane; quotaCache holds its
	// policies and this cluster's claims (Run makes it).
	quota      client.Client
	quotaCache crcache.Cache
	policies   *policySet

	memberKube     kubernetes.Interface
	memberDynamic  dynamic.Interface
	memberMetadata metadata.Interface
	mapper         *restmapper.DeferredDiscoveryRESTMapper

	mu      sync.Mutex
	watches watches
	// firstSeen is when the reconcile first saw an object without a claim.
	firstSeen map[string]time.Time
	// noCharge are objects no policy charged, by the policies' version then.
	noCharge map[string]string
	ready    bool

	metrics *webhookMetrics
	events  *eventSink
}

var scheme = runtime.NewScheme()

func init() {
	_ = clientgoscheme.AddToScheme(scheme)
	_ = quotav1alpha1.AddToScheme(scheme)
}

// Run serves the webhook until ctx is done. It returns an error, having
// stopped serving, when the quota plane's policies and this cluster's claims
// cannot be read at start (Options.QuotaSyncTimeout).
func Run(ctx context.Context, o *Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.identityFlagsPassed() {
		klog.FromContext(ctx).Info("Ignoring --user-prefix, --group-prefix and --trust-cluster-identities: "+IgnoredIdentityFlags, "cluster", o.ClusterName)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := newWebhook(ctx, o)
	if err != nil {
		return err
	}
	if w.credential != nil {
		go w.credential.Run(ctx)
	}
	began := time.Now()
	if w.quotaCache, err = newQuotaCache(ctx, w.quotaConfig, o); err != nil {
		// Its discovery requests are bounded by --quota-sync-timeout; the
		// client libraries do not all keep a timeout's type when they wrap.
		if timedOut(err) || time.Since(began) >= o.QuotaSyncTimeout {
			err = fmt.Errorf("not read within --quota-sync-timeout (%s): %w", o.QuotaSyncTimeout, err)
		}
		return w.quotaUnreadable(err)
	}
	certs, err := o.servingCerts()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(o.BindAddress, strconv.Itoa(o.SecurePort))
	ln, err := tls.Listen("tcp", addr, &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12})
	if err != nil {
		return fmt.Errorf("listening on %s (--bind-address, --secure-port): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", w.serveValidate)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", w.serveReady)
	mux.Handle("/metrics", w.metrics.handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	failed := make(chan error, 1)
	go func() {
		if err := w.run(ctx); err != nil {
			failed <- err
			cancel() // shuts the server down
		}
	}()
	klog.FromContext(ctx).Info("quotaplane webhook serving", "address", ln.Addr().String(), "cluster", o.ClusterName, "quotaPlane", w.reviewURL)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	select {
	case err := <-failed:
		return err
	default:
		return nil
	}
}

func newWebhook(ctx context.Context, o *Options) (*Webhook, error) {
	qcfg, err := o.QuotaConfig()
	if err != nil {
		return nil, err
	}
	mcfg, err := o.memberConfig()
	if err != nil {
		return nil, fmt.Errorf("this member cluster (--kubeconfig): %w", err)
	}
	w := &Webhook{opts: o, ctx: ctx, reviewURL: reviewURL(qcfg.Host, o.ClusterName), quotaConfig: qcfg, watches: watches{}, firstSeen: map[string]time.Time{}, noCharge: map[string]string{}}
	w.metrics = newMetrics(o.ClusterName)
	if w.memberKube, err = kubernetes.NewForConfig(mcfg); err != nil {
		return nil, err
	}
	if w.memberDynamic, err = dynamic.NewForConfig(mcfg); err != nil {
		return nil, err
	}
	if w.memberMetadata, err = metadata.NewForConfig(mcfg); err != nil {
		return nil, err
	}
	// Before any quota-plane client is made: New changes qcfg to send the
	// token it keeps fresh.
	secret, _ := o.quotaKubeconfigSecret()
	if w.credential, err = credential.New(ctx, qcfg, w.memberKube, credential.Options{Lifetime: o.QuotaTokenLifetime, Secret: secret,
		RefreshEvery: o.QuotaTokenRefreshEvery, Refreshed: w.metrics.credentialRefreshed}); err != nil {
		return nil, err
	}
	if w.credential != nil {
		w.metrics.watchCredential(w.credential)
	}
	if w.quotaHTTP, err = rest.HTTPClientFor(qcfg); err != nil {
		return nil, err
	}
	if w.quota, err = client.New(qcfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	w.policies = &policySet{list: func() []quotav1alpha1.ClaimCreationPolicy {
		list := &quotav1alpha1.ClaimCreationPolicyList{}
		if err := w.quotaCache.List(ctx, list); err != nil {
			return nil
		}
		return list.Items
	}}
	w.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(w.memberKube.Discovery()))
	w.events = newEventSink(w.memberKube)
	return w, nil
}

// run starts the caches, makes the cluster's namespace in the quota plane,
// and reconciles every period, until ctx is done. An error means the
// quota plane's cache could not start: the webhook cannot go on.
func (w *Webhook) run(ctx context.Context) error {
	log := klog.FromContext(ctx)
	if err := w.startQuotaCache(ctx); err != nil {
		return err
	}
	for {
		err := w.ensureNamespace(ctx)
		if err == nil {
			break
		}
		log.Error(err, "Creating this cluster's namespace in the quota plane; retrying", "namespace", members.Namespace(w.opts.ClusterName))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	w.mu.Lock()
	w.ready = true
	w.mu.Unlock()
	for {
		w.watchAll()
		wait := time.Second // until every watch has listed its objects
		if w.synced() {
			if err := w.reconcile(ctx); err != nil {
				log.Error(err, "Reconciling this cluster's claims with its objects")
			}
			wait = w.opts.ReconcilePeriod
			if w.waiting() && w.opts.ChargeAfter < wait {
				wait = w.opts.ChargeAfter // an object without a claim is due soon
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (w *Webhook) serveReady(rw http.ResponseWriter, _ *http.Request) {
	w.mu.Lock()
	ready := w.ready
	w.mu.Unlock()
	if !ready {
		http.Error(rw, "not ready: the quota plane's policies and this cluster's claims are not read yet", http.StatusServiceUnavailable)
		return
	}
	_, _ = rw.Write([]byte("ok"))
}

// ensureNamespace creates the namespace that holds this cluster's claims
// in the quota plane.
func (w *Webhook) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(w.opts.ClusterName), Labels: map[string]string{members.Label: w.opts.ClusterName}}}
	err := w.quota.Create(ctx, ns)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// certFiles serve the certificate in two files, read again when they
// change (cert-manager renews them in place).
type certFiles struct {
	certFile, keyFile string
	mu                sync.Mutex
	modTime           time.Time
	checked           time.Time
	cert              *tls.Certificate
}

// get is tls.Config.GetCertificate: the files are looked at once every
// few seconds at most.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert != nil && time.Since(c.checked) < 5*time.Second {
		return c.cert, nil
	}
	c.checked = time.Now()
	st, err := os.Stat(c.certFile)
	if err == nil && c.cert != nil && !st.ModTime().After(c.modTime) {
		return c.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.cert != nil {
			return c.cert, nil // half-written: keep serving the last one
		}
		return nil, fmt.Errorf("loading the serving certificate %s: %w", c.certFile, err)
	}
	if st != nil {
		c.modTime = st.ModTime()
	}
	c.cert = &pair
	return c.cert, nil
}

// servingCerts are the certificate given, or one generated (once) in
// CertDir.
func (o *Options) servingCerts() (*certFiles, error) {
	if o.TLSCertFile != "" {
		c := &certFiles{certFile: o.TLSCertFile, keyFile: o.TLSKeyFile}
		if _, err := c.get(nil); err != nil {
			return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file: %w", err)
		}
		return c, nil
	}
	certFile, keyFile := filepath.Join(o.CertDir, "tls.crt"), filepath.Join(o.CertDir, "tls.key")
	if _, err := os.Stat(certFile); os.IsNotExist(err) {
		host := o.BindAddress
		var ips []net.IP
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			ips = append(ips, ip)
		} else {
			host = "localhost"
		}
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, append(ips, net.ParseIP("127.0.0.1")), []string{"localhost"})
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
			return nil, fmt.Errorf("creating --cert-dir %s: %w", o.CertDir, err)
		}
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
			return nil, err
		}
	}
	c := &certFiles{certFile: certFile, keyFile: keyFile}
	if _, err := c.get(nil); err != nil {
		return nil, err
	}
	return c, nil
}
