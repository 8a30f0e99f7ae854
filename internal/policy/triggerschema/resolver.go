package triggerschema

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// ErrNotFound is wrapped by Resolve's error when the kind is not served.
var ErrNotFound = resolver.ErrSchemaNotFound

// DefaultTTL is how long a schema found is used before it is fetched again:
// a CRD's schema edited meanwhile is seen at most this late, unless
// Invalidate is called when CRDs change.
const DefaultTTL = 30 * time.Second

// Resolver finds the schema of a kind. It is safe for concurrent use.
type Resolver struct {
	inner resolver.SchemaResolver
	ttl   time.Duration
	now   func() time.Time

	mu    sync.Mutex
	cache map[schema.GroupVersionKind]cached
}

type cached struct {
	schema  *spec.Schema
	fetched time.Time
}

// New returns a resolver reading the server's OpenAPI v3 documents through
// d, keeping what it finds for ttl (DefaultTTL when 0).
func New(d discovery.DiscoveryInterface, ttl time.Duration) *Resolver {
	return newResolver(&resolver.ClientDiscoveryResolver{Discovery: d}, ttl)
}

func newResolver(inner resolver.SchemaResolver, ttl time.Duration) *Resolver {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	return &Resolver{inner: inner, ttl: ttl, now: time.Now, cache: map[schema.GroupVersionKind]cached{}}
}

// Resolve returns the schema of apiVersion/kind (apiVersion is group/version,
// or a version of the core group), with every reference resolved. The
// error wraps ErrNotFound when the server does not serve that kind (yet: a
// CRD may be installed later; not-found answers are not cached). The schema
// returned is shared: callers must not modify it.
func (r *Resolver) Resolve(apiVersion, kind string) (*spec.Schema, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("trigger apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	r.mu.Lock()
	c, ok := r.cache[gvk]
	r.mu.Unlock()
	if ok && r.now().Sub(c.fetched) < r.ttl {
		return c.schema, nil
	}
	s, err := r.inner.ResolveSchema(gvk)
	if err != nil {
		if errors.Is(err, resolver.ErrSchemaNotFound) {
			r.Invalidate(gv)
		}
		return nil, fmt.Errorf("schema of %s: %w", gvk, err)
	}
	r.mu.Lock()
	r.cache[gvk] = cached{schema: s, fetched: r.now()}
	r.mu.Unlock()
	return s, nil
}

// Invalidate forgets the schemas of one group version, for example when a
// CustomResourceDefinition of that group changes.
func (r *Resolver) Invalidate(gv schema.GroupVersion) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.cache {
		if k.GroupVersion() == gv {
			delete(r.cache, k)
		}
	}
}

// InvalidateGroup forgets the schemas of every version of a group.
func (r *Resolver) InvalidateGroup(group string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.cache {
		if k.Group == group {
			delete(r.cache, k)
		}
	}
}
