package portal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// StandaloneOptions configure `quotaplane portal`, the portal served next
// to `quotaplane controller` for any cluster.
type StandaloneOptions struct {
	// Listen is the address to serve on.
	Listen string
	// CertFile and KeyFile serve HTTPS; without them the portal serves
	// plain HTTP, and only on a loopback address (tokens cross it).
	CertFile, KeyFile string
	// SystemNamespace holds the decision histories.
	SystemNamespace string
}

// Handler serves the portal at /portal/ and passes /api and /apis to the
// cluster of cfg with the user's own Authorization header (never cfg's
// credentials), so that the pages call the API as the user.
func (p *Portal) Handler(cfg *rest.Config) (http.Handler, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("the cluster's address %q: %w", cfg.Host, err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	transport, err := rest.TransportFor(rest.AnonymousClientConfig(cfg))
	if err != nil {
		return nil, err
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", proxy)
	mux.Handle("/apis/", proxy)
	mux.Handle("/api", proxy)
	mux.Handle("/apis", proxy)
	mux.Handle("/", p.Wrap(http.RedirectHandler(Prefix, http.StatusFound)))
	return mux, nil
}

// RunStandalone serves the portal for the cluster of cfg until ctx ends.
func RunStandalone(ctx context.Context, cfg *rest.Config, o StandaloneOptions) error {
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", o.Listen, err)
	}
	tls := o.CertFile != "" || o.KeyFile != ""
	if tls && (o.CertFile == "" || o.KeyFile == "") {
		return errors.New("serving HTTPS needs both --tls-cert-file and --tls-private-key-file")
	}
	if ip := net.ParseIP(host); !tls && (ip == nil || !ip.IsLoopback()) && host != "localhost" {
		return fmt.Errorf("--listen %s is not a loopback address: users' tokens would cross the network in clear; give --tls-cert-file and --tls-private-key-file, or listen on 127.0.0.1", o.Listen)
	}
	p := New(Options{SystemNamespace: o.SystemNamespace})
	if err := p.Start(ctx, cfg); err != nil {
		return err
	}
	h, err := p.Handler(cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.Listen, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	scheme := "http"
	if tls {
		scheme = "https"
	}
	klog.FromContext(ctx).Info("Serving the portal", "url", fmt.Sprintf("%s://%s%s", scheme, l.Addr(), Prefix), "cluster", cfg.Host)
	if tls {
		err = srv.ServeTLS(l, o.CertFile, o.KeyFile)
	} else {
		err = srv.Serve(l)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
