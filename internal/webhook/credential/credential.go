package credential

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"
)

// Options say how a Credential is kept.
type Options struct {
	// Lifetime is what each minted token is asked for (the quota plane
	// may shorten it).
	Lifetime time.Duration
	// Secret is the member cluster's Secret whose "kubeconfig" key holds
	// the webhook's quota-plane kubeconfig; empty: nothing is persisted.
	Secret types.NamespacedName
	// RefreshEvery, when positive, refreshes at most this long after a
	// token was issued (test builds only: --quota-token-refresh-every).
	RefreshEvery time.Duration
	// Refreshed is told of each refresh's result; may be nil.
	Refreshed func(error)
}

// SecretKey is the key of Options.Secret holding the kubeconfig.
const SecretKey = "kubeconfig"

// Credential is the service-account token the webhook's quota-plane
// clients send, refreshed by Run.
type Credential struct {
	opts   Options
	member kubernetes.Interface
	quota  kubernetes.Interface
	cur    atomic.Pointer[Token]
	// unsaved is a token in use that is not yet in the Secret.
	unsaved bool
}

// New reads the token of qcfg (the quota plane's client configuration,
// from --quota-kubeconfig) and, with a Secret, the token the Secret holds,
// and keeps the later-expiring one. It returns nil without an error when the
// credential is not a service-account token: there is nothing it can
// refresh. On success, qcfg is changed to send the
// Credential's current token on every request.
func New(ctx context.Context, qcfg *rest.Config, member kubernetes.Interface, o Options) (*Credential, error) {
	raw := qcfg.BearerToken
	if qcfg.BearerTokenFile != "" {
		data, err := os.ReadFile(qcfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("reading the quota plane's token file: %w", err)
		}
		raw = string(data)
	}
	tok, err := Parse(trimToken(raw))
	if err != nil {
		// A client certificate or another kind of token: whoever issued it
		// renews it (for a certificate, in the kubeconfig Secret).
		klog.FromContext(ctx).Info("The quota plane credential is not a service-account token with an expiry: the webhook does not refresh it", "reason", err.Error())
		return nil, nil
	}
	c := &Credential{opts: o, member: member}
	if o.Secret.Name != "" {
		saved, err := c.saved(ctx)
		if err != nil {
			return nil, err
		}
		if saved != nil && saved.Namespace == tok.Namespace && saved.Name == tok.Name && saved.Expires.After(tok.Expires) {
			tok = *saved
		}
	}
	c.cur.Store(&tok)
	qcfg.BearerToken, qcfg.BearerTokenFile = "", ""
	qcfg.WrapTransport = transport.Wrappers(qcfg.WrapTransport, c.wrap)
	if c.quota, err = kubernetes.NewForConfig(qcfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Current is the token in use.
func (c *Credential) Current() Token { return *c.cur.Load() }

// Run refreshes the token when it is due until ctx is done. A refresh that
// fails leaves the token in use and is retried, 2 s after the first failure
// and twice as long after each next, up to a minute.
func (c *Credential) Run(ctx context.Context) {
	log := klog.FromContext(ctx)
	failures := 0
	for {
		tok := c.Current()
		wait := time.Until(tok.refreshAt(c.opts.RefreshEvery))
		if c.unsaved {
			wait = 0
		}
		if failures > 0 {
			wait = min(time.Second<<min(failures, 6), time.Minute)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := c.refresh(ctx)
		if c.opts.Refreshed != nil {
			c.opts.Refreshed(err)
		}
		if err == nil {
			failures = 0
			cur := c.Current()
			log.V(2).Info("Refreshed the quota plane credential", "serviceAccount", cur.Namespace+"/"+cur.Name, "expires", cur.Expires)
			continue
		}
		failures++
		log.Error(err, "Refreshing the quota plane credential failed; the token in use is kept and the refresh retried",
			"serviceAccount", tok.Namespace+"/"+tok.Name, "expires", tok.Expires, "expiresIn", time.Until(tok.Expires).Round(time.Second).String(),
			"toFix", "in the quota plane, bind the service account a Role allowing create on serviceaccounts/token for its own name (quotaplane webhook print-rbac --service-account); "+
				"in this cluster, let the webhook get and update its kubeconfig Secret; or, before the token expires, put a fresh one in the kubeconfig Secret (quotaplane kubeconfig --service-account) and restart the webhook")
	}
}

// refresh mints a successor of the token in use and saves it, or saves
// the one in use when an earlier save failed.
func (c *Credential) refresh(ctx context.Context) error {
	if !c.unsaved {
		cur := c.Current()
		seconds := int64(c.opts.Lifetime / time.Second)
		tr, err := c.quota.CoreV1().ServiceAccounts(cur.Namespace).CreateToken(ctx, cur.Name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("asking the quota plane for a token of service account %s/%s: %w", cur.Namespace, cur.Name, err)
		}
		next, err := Parse(tr.Status.Token)
		if err != nil {
			return fmt.Errorf("the quota plane's new token: %w", err)
		}
		if next.Namespace != cur.Namespace || next.Name != cur.Name {
			return fmt.Errorf("the quota plane returned a token of %s/%s for %s/%s", next.Namespace, next.Name, cur.Namespace, cur.Name)
		}
		c.cur.Store(&next)
		c.unsaved = c.opts.Secret.Name != ""
	}
	if c.unsaved {
		if err := c.save(ctx, c.Current()); err != nil {
			return err
		}
		c.unsaved = false
	}
	return nil
}

// wrap sends the current token with every request that carries none.
func (c *Credential) wrap(rt http.RoundTripper) http.RoundTripper {
	return &bearer{c: c, next: rt}
}

type bearer struct {
	c    *Credential
	next http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return b.next.RoundTrip(req)
	}
	req = utilnet.CloneRequest(req)
	req.Header.Set("Authorization", "Bearer "+b.c.Current().Raw)
	return b.next.RoundTrip(req)
}

func (b *bearer) WrappedRoundTripper() http.RoundTripper { return b.next }
