package planeserve

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	api "k8s.io/kubernetes/pkg/apis/core"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// Storage routes each resource's storage by the plane a request is made to.
type Storage struct {
	// SystemNamespace is where a plane shows its quota objects.
	SystemNamespace string
	// Registry is told of namespaces deleted in planes.
	Registry *Registry

	collect atomic.Pointer[func(p planes.Plane, namespace string)]
}

// OnCollect sets what is told when an object of a plane is deleted, marked
// for deletion (a deletionTimestamp written) or created with owners: the
// plane and the object's namespace ("" for a cluster-scoped object). The
// plane collector uses it to act on ownerReferences and namespace deletion
// there.
func (s *Storage) OnCollect(f func(p planes.Plane, namespace string)) { s.collect.Store(&f) }

func (s *Storage) collectable(p planes.Plane, obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if _, isNamespace := obj.(*api.Namespace); isNamespace && s.Registry != nil {
		s.Registry.namespaceDeleted(p, m.GetName())
	}
	if f := s.collect.Load(); f != nil {
		(*f)(p, m.GetNamespace())
	}
}

// OptionsGetter wraps a REST options getter so that every storage it makes
// is routed by plane.
func (s *Storage) OptionsGetter(inner generic.RESTOptionsGetter) generic.RESTOptionsGetter {
	return optionsGetter{inner: inner, s: s}
}

type optionsGetter struct {
	inner generic.RESTOptionsGetter
	s     *Storage
}

func (g optionsGetter) GetRESTOptions(gr schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	o, err := g.inner.GetRESTOptions(gr, example)
	if err != nil {
		return o, err
	}
	o.Decorator = g.s.decorate(o.Decorator)
	return o, nil
}

// decorate makes the root's storage as inner does (the watch cache) and
// routes requests to planes around it.
func (s *Storage) decorate(inner generic.StorageDecorator) generic.StorageDecorator {
	return func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(obj runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		root, destroyRoot, err := inner(config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrs, trigger, indexers)
		if err != nil {
			return nil, nil, err
		}
		r := &router{Interface: root, s: s, route: routeOf(config.GroupResource), gr: config.GroupResource, prefix: resourcePrefix,
			systemNamespace: s.SystemNamespace,
			claims:          config.GroupResource == (schema.GroupResource{Group: planes.QuotaGroup, Resource: "resourceclaims"})}
		cfg := *config
		r.open = func() (storage.Interface, factory.DestroyFunc, error) {
			// Every plane's objects of this resource, under /planes/.
			return generic.NewRawStorage(&cfg, newFunc, newListFunc, strings.TrimSuffix(planes.KeyRoot, "/"))
		}
		return r, func() {
			r.close()
			destroyRoot()
		}, nil
	}
}

// router is one resource's storage: the root's (embedded), and for requests
// to planes what the resource's route says.
type router struct {
	storage.Interface
	s               *Storage
	route           route
	gr              schema.GroupResource
	prefix          string
	systemNamespace string
	// claims: a plane's claims are shown in the namespace each names
	// (LabelPlaneNamespace), not only in its system namespace.
	claims bool

	// open makes the storage of every plane's objects of this resource,
	// the first time a plane uses it.
	open    func() (storage.Interface, factory.DestroyFunc, error)
	mu      sync.Mutex
	planes  storage.Interface
	destroy factory.DestroyFunc
}

func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.destroy != nil {
		r.destroy()
	}
}

func (r *router) local() (storage.Interface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.planes == nil {
		s, d, err := r.open()
		if err != nil {
			return nil, fmt.Errorf("opening the control planes' storage of %s: %w", r.gr, err)
		}
		r.planes, r.destroy = s, d
	}
	return r.planes, nil
}

// target is where a request on key goes: the storage and the key there.
// A nil storage with a nil error means the key names nothing that can
// exist in the plane (a quota object outside its system namespace).
func (r *router) target(ctx context.Context, key string) (storage.Interface, string, *planes.Plane, error) {
	p, ok := planes.From(ctx)
	if !ok {
		return r.Interface, key, nil, nil
	}
	if p.UID == "" {
		return nil, "", nil, apierrors.NewInternalError(fmt.Errorf("a request to control plane %s reached storage before the plane was resolved", p))
	}
	switch r.route {
	case local:
		s, err := r.local()
		return s, p.KeyPrefix() + key, &p, err
	case shared, orgProjects:
		return r.Interface, key, &p, nil
	case mapped:
		k, ok := r.mapKey(p, key)
		if !ok {
			return nil, "", &p, nil
		}
		return r.Interface, k, &p, nil
	}
	return nil, "", &p, apierrors.NewForbidden(r.gr, "", fmt.Errorf("%s", refusal(p, r.gr, "get")))
}

// mapKey is the root's key of a plane's quota object: the plane's system
// namespace is its quota namespace at the root, and so is every namespace
// of the plane for claims (shown where each names). ok is false for another
// namespace of the plane, where no other quota object can be.
func (r *router) mapKey(p planes.Plane, key string) (string, bool) {
	rest := strings.TrimPrefix(strings.TrimPrefix(key, r.prefix), "/")
	if rest == "" {
		return r.prefix + "/" + p.QuotaNamespace(), true
	}
	ns, name, _ := strings.Cut(rest, "/")
	if ns != r.systemNamespace && !r.claims {
		return "", false
	}
	k := r.prefix + "/" + p.QuotaNamespace()
	if name != "" {
		k += "/" + name
	}
	return k, true
}

func (r *router) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	s, k, p, err := r.target(ctx, key)
	switch {
	case err != nil:
		return err
	case p == nil:
		return s.Create(ctx, k, obj, out, ttl)
	case s == nil:
		return apierrors.NewBadRequest(fmt.Sprintf("%s of a control plane live in its namespace %s; create it there", r.gr, r.systemNamespace))
	}
	switch r.route {
	case shared:
		return apierrors.NewForbidden(r.gr, "", fmt.Errorf("%s", refusal(*p, r.gr, "create")))
	case orgProjects:
		if err := r.checkProject(*p, obj); err != nil {
			return err
		}
	case mapped:
		r.placeNew(*p, r.view(key), obj)
		defer r.show(*p, out)
	case local:
		if err := s.Create(ctx, k, obj, out, ttl); err != nil {
			return err
		}
		if m, err := meta.Accessor(out); err == nil && len(m.GetOwnerReferences()) > 0 {
			// Its owner may be gone already.
			r.s.collectable(*p, out)
		}
		return nil
	}
	return s.Create(ctx, k, obj, out, ttl)
}

func (r *router) Delete(ctx context.Context, key string, out runtime.Object, pre *storage.Preconditions, validate storage.ValidateObjectFunc, cached runtime.Object, opts storage.DeleteOptions) error {
	s, k, p, err := r.target(ctx, key)
	switch {
	case err != nil:
		return err
	case p == nil:
		return s.Delete(ctx, k, out, pre, validate, cached, opts)
	case s == nil:
		return r.notFound(key)
	}
	switch r.route {
	case shared:
		return apierrors.NewForbidden(r.gr, "", fmt.Errorf("%s", refusal(*p, r.gr, "delete")))
	case orgProjects:
		inner := validate
		validate = func(ctx context.Context, obj runtime.Object) error {
			if !r.ownProject(*p, obj) {
				return r.notFound(key)
			}
			return inner(ctx, obj)
		}
	case mapped:
		inner, ns := validate, r.view(key)
		validate = func(ctx context.Context, obj runtime.Object) error {
			shown := r.shown(*p, obj)
			if !inView(shown, ns) {
				return r.notFound(key)
			}
			return inner(ctx, shown)
		}
		cached = nil
		defer r.show(*p, out)
	case local:
		if err := s.Delete(ctx, k, out, pre, validate, cached, opts); err != nil {
			return err
		}
		r.s.collectable(*p, out)
		return nil
	}
	return s.Delete(ctx, k, out, pre, validate, cached, opts)
}

func (r *router) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	s, k, p, err := r.target(ctx, key)
	switch {
	case err != nil:
		return err
	case p == nil:
		return s.Get(ctx, k, opts, out)
	case s == nil:
		if opts.IgnoreNotFound {
			return nil
		}
		return storage.NewKeyNotFoundError(key, 0)
	}
	if err := s.Get(ctx, k, opts, out); err != nil {
		return err
	}
	switch r.route {
	case orgProjects:
		if !r.ownProject(*p, out) {
			if opts.IgnoreNotFound {
				return nil
			}
			return storage.NewKeyNotFoundError(key, 0)
		}
	case mapped:
		r.show(*p, out)
		if !inView(out, r.view(key)) {
			if opts.IgnoreNotFound {
				return nil
			}
			return storage.NewKeyNotFoundError(key, 0)
		}
	}
	return nil
}

func (r *router) GetList(ctx context.Context, key string, opts storage.ListOptions, list runtime.Object) error {
	s, k, p, err := r.target(ctx, key)
	switch {
	case err != nil:
		return err
	case p == nil:
		return s.GetList(ctx, k, opts, list)
	case s == nil:
		// Nothing but the system namespace holds quota objects: an empty
		// list at the current revision.
		rv, err := r.GetCurrentResourceVersion(ctx)
		if err != nil {
			return err
		}
		return r.Versioner().UpdateList(list, rv, "", nil)
	}
	if r.route == orgProjects {
		opts.Predicate = r.organizationOnly(*p, opts.Predicate)
	}
	if err := s.GetList(ctx, k, opts, list); err != nil {
		return err
	}
	if r.route == mapped {
		r.showList(*p, list)
		return filterList(list, r.view(key))
	}
	return nil
}

func (r *router) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	s, k, p, err := r.target(ctx, key)
	switch {
	case err != nil:
		return nil, err
	case p == nil:
		return s.Watch(ctx, k, opts)
	case s == nil:
		return watch.NewEmptyWatch(), nil
	}
	if r.route == orgProjects {
		opts.Predicate = r.organizationOnly(*p, opts.Predicate)
	}
	w, err := s.Watch(ctx, k, opts)
	if err != nil || r.route != mapped {
		return w, err
	}
	plane, ns := *p, r.view(key)
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type != watch.Error && e.Type != watch.Bookmark {
			e.Object = r.shown(plane, e.Object)
			return e, inView(e.Object, ns)
		}
		return e, true
	}), nil
}

func (r *router) GuaranteedUpdate(ctx context.Context, key string, dest runtime.Object, ignoreNotFound bool, pre *storage.Preconditions, try storage.UpdateFunc, cached runtime.Object) error {
	s, k, p, err := r.target(ctx, key)
	switch {
	case err != nil:
		return err
	case p == nil:
		return s.GuaranteedUpdate(ctx, k, dest, ignoreNotFound, pre, try, cached)
	case s == nil:
		return storage.NewKeyNotFoundError(key, 0)
	}
	plane := *p
	switch r.route {
	case shared:
		return apierrors.NewForbidden(r.gr, "", fmt.Errorf("%s", refusal(plane, r.gr, "update")))
	case orgProjects:
		inner := try
		try = func(in runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			if !absent(in) && !r.ownProject(plane, in) {
				return nil, nil, r.notFound(key)
			}
			out, ttl, err := inner(in, res)
			if err == nil {
				err = r.checkProject(plane, out)
			}
			return out, ttl, err
		}
	case mapped:
		inner, ns := try, r.view(key)
		try = func(in runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
			if absent(in) {
				// Nothing stored under the key and the update may create
				// (server-side apply, a PUT of a new object): created in
				// the plane's quota namespace, shown where it was made,
				// as Create does.
				out, ttl, err := inner(in, res)
				if err == nil {
					r.placeNew(plane, ns, out)
				}
				return out, ttl, err
			}
			shown := r.shown(plane, in)
			if !inView(shown, ns) {
				return nil, nil, r.notFound(key)
			}
			out, ttl, err := inner(shown, res)
			if err == nil {
				setNamespace(out, plane.QuotaNamespace())
			}
			return out, ttl, err
		}
		cached = nil
		defer r.show(plane, dest)
	case local:
		if err := s.GuaranteedUpdate(ctx, k, dest, ignoreNotFound, pre, try, cached); err != nil {
			return err
		}
		if m, err := meta.Accessor(dest); err == nil && m.GetDeletionTimestamp() != nil {
			// Deleted in the foreground, orphaning, or a namespace
			// terminating: the collector finishes it.
			r.s.collectable(plane, dest)
		}
		return nil
	}
	return s.GuaranteedUpdate(ctx, k, dest, ignoreNotFound, pre, try, cached)
}

// view is the plane namespace a mapped key names ("" for all of them).
func (r *router) view(key string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(key, r.prefix), "/")
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

// filterList keeps the items of list shown in plane namespace ns.
func filterList(list runtime.Object, ns string) error {
	if ns == "" {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, o := range items {
		if inView(o, ns) {
			kept = append(kept, o)
		}
	}
	return meta.SetList(list, kept)
}

// placeNew places obj, a quota object made in plane namespace ns of plane
// p, at the root: in the plane's quota namespace, and a claim made outside
// the plane's system namespace labelled to be shown where it was made.
func (r *router) placeNew(p planes.Plane, ns string, obj runtime.Object) {
	if r.claims && ns != "" && ns != r.systemNamespace {
		if m, err := meta.Accessor(obj); err == nil {
			l := m.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[quotav1alpha1.LabelPlaneNamespace] = ns
			m.SetLabels(l)
		}
	}
	setNamespace(obj, p.QuotaNamespace())
}

// absent reports whether in is what the storage gives an update for a key
// that holds nothing: a new, empty object.
func absent(in runtime.Object) bool {
	m, err := meta.Accessor(in)
	return err == nil && m.GetName() == "" && m.GetResourceVersion() == "" && m.GetUID() == ""
}

// notFound is the 404 of the object a storage key names: its name, as the
// API answers any missing object, never the key itself.
func (r *router) notFound(key string) error {
	return apierrors.NewNotFound(r.gr, path.Base(key))
}
