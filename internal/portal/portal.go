package portal

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/reconcile"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
)

// Prefix is where the portal is served.
const Prefix = "/portal/"

//go:embed web
var web embed.FS

var scheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, quotav1alpha1.AddToScheme, rmv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
}

// Options configure the portal.
type Options struct {
	// SystemNamespace holds the decision history ConfigMaps.
	SystemNamespace string
}

// Portal serves the pages and the portal's own API. Until Start, its API
// answers 503.
type Portal struct {
	opts   Options
	static http.Handler
	csp    string // the Content-Security-Policy of every answer

	mu       sync.RWMutex
	userBase *rest.Config        // how to reach the API server, without credentials
	reviews  versioned.Interface // the portal's own: QuotaReviews for the request form's sizing
	done     <-chan struct{}     // closed when the server stops: streams end
	informers
	identities *identityCache

	subsMu sync.Mutex
	subs   map[chan struct{}]struct{}
}

// informers are what the portal answers from, read with its own identity.
type informers struct {
	buckets, requests, orgs, projects, histories, roleBindings toolscache.SharedIndexInformer
}

// New returns a portal; Start gives it the API server.
func New(opts Options) *Portal {
	sub, err := fs.Sub(web, "web")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix(strings.TrimSuffix(Prefix, "/"), http.FileServerFS(sub))
	csp, err := contentSecurityPolicy(sub)
	if err != nil {
		panic(err)
	}
	return &Portal{opts: opts, csp: csp, identities: newIdentityCache(30 * time.Second), subs: map[chan struct{}]struct{}{},
		static: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The pages are small and change with the binary: revalidate.
			w.Header().Set("Cache-Control", "no-cache")
			files.ServeHTTP(w, r)
		})}
}

// Start runs the portal's informers with cfg, a privileged identity, and
// takes from it how users' requests reach the API server.
func (p *Portal) Start(ctx context.Context, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	cfg = rest.AddUserAgent(cfg, "quotaplane-portal")
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating the portal's client: %w", err)
	}
	reviews, err := versioned.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the portal's quota client: %w", err)
	}
	const resync = 10 * time.Hour
	inf := informers{
		buckets:      reconcile.NewInformer(cl, &quotav1alpha1.AllowanceBucket{}, &quotav1alpha1.AllowanceBucketList{}, "", "", resync),
		requests:     reconcile.NewInformer(cl, &quotav1alpha1.QuotaRequest{}, &quotav1alpha1.QuotaRequestList{}, "", "", resync),
		orgs:         reconcile.NewInformer(cl, &rmv1alpha1.Organization{}, &rmv1alpha1.OrganizationList{}, "", "", resync),
		projects:     reconcile.NewInformer(cl, &rmv1alpha1.Project{}, &rmv1alpha1.ProjectList{}, "", "", resync),
		histories:    reconcile.NewInformer(cl, &corev1.ConfigMap{}, &corev1.ConfigMapList{}, p.opts.SystemNamespace, history.LabelHistory+"=true", resync),
		roleBindings: reconcile.NewInformer(cl, &rbacv1.RoleBinding{}, &rbacv1.RoleBindingList{}, "", "", resync),
	}
	changed := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { p.broadcast() }, UpdateFunc: func(any, any) { p.broadcast() }, DeleteFunc: func(any) { p.broadcast() },
	}
	for _, i := range []toolscache.SharedIndexInformer{inf.buckets, inf.requests} {
		if _, err := i.AddEventHandler(changed); err != nil {
			return err
		}
	}
	for _, i := range []toolscache.SharedIndexInformer{inf.buckets, inf.requests, inf.orgs, inf.projects, inf.histories, inf.roleBindings} {
		go i.RunWithContext(ctx)
	}
	p.mu.Lock()
	p.userBase = rest.AnonymousClientConfig(cfg)
	p.reviews = reviews
	p.informers = inf
	p.done = ctx.Done()
	p.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Portal started", "path", Prefix)
	return nil
}

// Wrap serves the portal's paths and hands every other request to next.
func (p *Portal) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(r.URL.Path, Prefix) {
			p.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP serves /portal/.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	secure(w.Header(), p.csp)
	switch path := r.URL.Path; {
	case path == strings.TrimSuffix(Prefix, "/"):
		http.Redirect(w, r, Prefix, http.StatusFound)
	case strings.HasPrefix(path, Prefix+"api/"):
		p.serveAPI(w, r, strings.TrimPrefix(path, Prefix+"api/"))
	default:
		p.static.ServeHTTP(w, r)
	}
}

func (p *Portal) serveAPI(w http.ResponseWriter, r *http.Request, what string) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: the portal's API only answers GET", r.Method, r.URL.Path))
		return
	}
	p.mu.RLock()
	started := p.userBase != nil
	p.mu.RUnlock()
	if !started {
		writeError(w, http.StatusServiceUnavailable, "the portal is starting; retry in a few seconds")
		return
	}
	id, status, err := p.identify(r)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	switch what {
	case "whoami":
		p.whoami(w, r, id)
	case "overview":
		p.overview(w, r, id)
	case "events":
		p.events(w, r, id)
	case "history":
		p.history(w, r, id)
	case "locate":
		p.locate(w, r, id)
	case "size":
		p.size(w, r, id)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s is not part of the portal's API: it has whoami, overview, events, history, locate and size", r.URL.Path))
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		klog.V(4).Info("Writing a portal answer failed", "err", err)
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// errStatus carries an HTTP status with an error.
type errStatus struct {
	status int
	err    error
}

func (e errStatus) Error() string { return e.err.Error() }

func statusOf(err error) int {
	var es errStatus
	if errors.As(err, &es) {
		return es.status
	}
	return http.StatusInternalServerError
}
