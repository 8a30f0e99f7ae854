package kinds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ErrNotServed means a resource is defined (its CRD exists) but serves no
// version: its objects exist in storage and cannot be read. Callers keep
// whatever they hold for them and ask again later.
var ErrNotServed = errors.New("no version of this resource is served")

// cacheFor is how long what a CRD says is trusted before it is read again.
const cacheFor = 10 * time.Second

// Resolver maps recorded resources to the versions served now.
type Resolver struct {
	// crd reads the CustomResourceDefinition of that name.
	crd func(ctx context.Context, name string) (*unstructured.Unstructured, error)
	now func() time.Time

	mu    sync.Mutex
	known map[schema.GroupResource]definition
}

// definition is what a CRD said of a resource, when it was read.
type definition struct {
	crd     bool     // false: no CRD defines it (a built-in resource)
	served  []string // served versions, in the CRD's order
	storage string   // the storage version
	readAt  time.Time
}

// New resolves through c.
func New(c dynamic.Interface) *Resolver {
	return &Resolver{now: time.Now, known: map[schema.GroupResource]definition{},
		crd: func(ctx context.Context, name string) (*unstructured.Unstructured, error) {
			return c.Resource(crdResource()).Get(ctx, name, metav1.GetOptions{})
		}}
}

func crdResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
}

// Resolve returns the version recorded's objects are read at now: recorded
// itself while its version is served (or the resource is built in);
// otherwise the CRD's storage version when served, else its first served
// version. ErrNotServed when the CRD serves none.
func (r *Resolver) Resolve(ctx context.Context, recorded schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	d, err := r.definition(ctx, recorded.GroupResource(), false)
	if err != nil {
		return recorded, err
	}
	if !d.crd || slices.Contains(d.served, recorded.Version) {
		return recorded, nil
	}
	// The cache may be older than the change that made recorded unserved,
	// or served again: read the CRD once more before choosing another.
	if d, err = r.definition(ctx, recorded.GroupResource(), true); err != nil {
		return recorded, err
	}
	switch {
	case !d.crd || slices.Contains(d.served, recorded.Version):
		return recorded, nil
	case slices.Contains(d.served, d.storage):
		recorded.Version = d.storage
		return recorded, nil
	case len(d.served) > 0:
		recorded.Version = d.served[0]
		return recorded, nil
	}
	return recorded, fmt.Errorf("%w: %s (its CustomResourceDefinition serves none of its versions; its objects are kept until one is)", ErrNotServed, recorded.GroupResource())
}

// definition reads (or recalls) what defines gr.
func (r *Resolver) definition(ctx context.Context, gr schema.GroupResource, fresh bool) (definition, error) {
	r.mu.Lock()
	d, ok := r.known[gr]
	r.mu.Unlock()
	if ok && !fresh && r.now().Sub(d.readAt) < cacheFor {
		return d, nil
	}
	d = definition{readAt: r.now()}
	if gr.Group != "" {
		u, err := r.crd(ctx, CRDName(gr))
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return d, fmt.Errorf("reading the CustomResourceDefinition of %s: %w", gr, err)
		default:
			d.crd = true
			d.served, d.storage = versionsOf(u)
		}
	}
	r.mu.Lock()
	r.known[gr] = d
	r.mu.Unlock()
	return d, nil
}

// versionsOf reads a CRD's served versions and its storage version.
func versionsOf(u *unstructured.Unstructured) (served []string, storage string) {
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		if s, _ := m["served"].(bool); s {
			served = append(served, name)
		}
		if s, _ := m["storage"].(bool); s {
			storage = name
		}
	}
	return served, storage
}

// Read calls read at the version recorded's objects are read at now. When
// read finds nothing (NotFound), the definition is read again: had a version
// been unserved since it was cached, the object is read at the served one
// before NotFound is believed. It returns read's error, or ErrNotServed.
func (r *Resolver) Read(ctx context.Context, recorded schema.GroupVersionResource, read func(schema.GroupVersionResource) error) error {
	gvr, err := r.Resolve(ctx, recorded)
	if err != nil {
		return err
	}
	err = read(gvr)
	if !apierrors.IsNotFound(err) {
		return err
	}
	d, derr := r.definition(ctx, recorded.GroupResource(), true)
	if derr != nil {
		return derr
	}
	if !d.crd || slices.Contains(d.served, gvr.Version) {
		return err // served: the object is really not there
	}
	again, rerr := r.Resolve(ctx, recorded)
	if rerr != nil {
		return rerr
	}
	return read(again)
}

// CRDResource finds, from the CustomResourceDefinitions themselves, the
// resource a CRD-defined kind is served at: its storage version when served,
// else its first served version. Discovery lags a new CRD by seconds; this
// does not. ok is false when no CRD defines gk or none of its versions is
// served.
func CRDResource(ctx context.Context, c dynamic.Interface, gk schema.GroupKind) (gvr schema.GroupVersionResource, ok bool, err error) {
	if gk.Group == "" {
		return gvr, false, nil
	}
	list, err := c.Resource(crdResource()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return gvr, false, fmt.Errorf("listing CustomResourceDefinitions: %w", err)
	}
	for i := range list.Items {
		u := &list.Items[i]
		group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		plural, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
		if group != gk.Group || kind != gk.Kind {
			continue
		}
		served, storage := versionsOf(u)
		switch {
		case slices.Contains(served, storage):
			return schema.GroupVersionResource{Group: group, Version: storage, Resource: plural}, true, nil
		case len(served) > 0:
			return schema.GroupVersionResource{Group: group, Version: served[0], Resource: plural}, true, nil
		}
		return gvr, false, nil
	}
	return gvr, false, nil
}

// CRDVersion is the version a CRD-defined resource is served at, from its
// CustomResourceDefinition (storage version when served, else the first
// served); ok is false when no CRD defines gr or it serves no version.
func (r *Resolver) CRDVersion(ctx context.Context, gr schema.GroupResource) (string, bool, error) {
	if gr.Group == "" {
		return "", false, nil
	}
	d, err := r.definition(ctx, gr, false)
	if err != nil || !d.crd {
		return "", false, err
	}
	switch {
	case slices.Contains(d.served, d.storage):
		return d.storage, true, nil
	case len(d.served) > 0:
		return d.served[0], true, nil
	}
	return "", false, nil
}

// ResourceFor is the resource of a kind at version (any served version
// when ""), through discovery, then — discovery lags a new CRD by seconds —
// through the CRDs themselves. The zero value when no version is served.
func ResourceFor(ctx context.Context, mapper meta.ResettableRESTMapper, c dynamic.Interface, gk schema.GroupKind, version string) (schema.GroupVersionResource, error) {
	var versions []string
	if version != "" {
		versions = []string{version}
	}
	m, err := mapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		m, err = mapper.RESTMapping(gk, versions...)
	}
	if err == nil {
		return m.Resource, nil
	}
	if !meta.IsNoMatchError(err) {
		return schema.GroupVersionResource{}, err
	}
	gvr, _, err := CRDResource(ctx, c, gk)
	return gvr, err
}
