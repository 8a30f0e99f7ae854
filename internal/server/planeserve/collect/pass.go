package collect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// pass reads job j's plane (or namespace of it) and makes the changes
// plan says. again is true when the pass must run again.
func (c *Collector) pass(ctx context.Context, j job) (again bool, err error) {
	if current, err := c.Registry.Current(j.plane); err != nil || !current {
		// A removed plane's data is the cleaner's.
		return false, err
	}
	// Made per pass, not kept: an idle plane holds nothing of the collector
	// (the transport is shared).
	md, err := metadata.NewForConfig(planes.ConfigFor(c.config, j.plane))
	if err != nil {
		return false, err
	}
	kube, err := c.Registry.Kube(j.plane)
	if err != nil {
		return false, err
	}
	s, err := c.read(ctx, j, md, kube.CoreV1().Namespaces())
	if err != nil {
		return false, err
	}
	steps, again := plan(s)
	logger := klog.FromContext(ctx).WithValues("plane", j.plane.String())
	var errs []error
	for _, st := range steps {
		if err := c.do(ctx, md, kube.CoreV1().Namespaces(), st); err != nil {
			errs = append(errs, err)
			continue
		}
		if st.obj != nil {
			logger.V(3).Info("Collected", "step", st.kind, "resource", st.obj.res.gvr.String(), "object", klog.KRef(st.obj.meta.Namespace, st.obj.meta.Name), "why", st.why)
		}
	}
	if len(errs) > 0 {
		return again, fmt.Errorf("%d of %d changes in control plane %s failed; the first: %w", len(errs), len(steps), j.plane, errs[0])
	}
	return again, nil
}

type namespaceClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NamespaceList, error)
	Finalize(ctx context.Context, item *corev1.Namespace, opts metav1.UpdateOptions) (*corev1.Namespace, error)
}

// read takes the snapshot of j: the objects first, then the namespaces,
// so that an object whose namespace is not found was in one deleted.
func (c *Collector) read(ctx context.Context, j job, md metadata.Interface, nss namespaceClient) (snapshot, error) {
	s := snapshot{scope: j.namespace, namespaces: map[string]*corev1.Namespace{}}
	resources, err := c.discovery.resources()
	if err != nil {
		return s, err
	}
	for _, r := range resources {
		if r.gvr.Group == "" && r.gvr.Resource == "namespaces" || (j.namespace != "" && !r.namespaced) {
			continue
		}
		list, err := md.Resource(r.gvr).Namespace(j.namespace).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
			continue // not served in planes, or gone since discovery
		case err != nil:
			return s, fmt.Errorf("listing %s in control plane %s: %w", r.gvr.GroupResource(), j.plane, err)
		}
		for i := range list.Items {
			s.objects = append(s.objects, object{res: r, meta: list.Items[i].ObjectMeta})
		}
	}
	if j.namespace != "" {
		ns, err := nss.Get(ctx, j.namespace, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return s, fmt.Errorf("reading namespace %s of control plane %s: %w", j.namespace, j.plane, err)
		default:
			s.namespaces[ns.Name] = ns
		}
		return s, nil
	}
	list, err := nss.List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("listing the namespaces of control plane %s: %w", j.plane, err)
	}
	for i := range list.Items {
		s.namespaces[list.Items[i].Name] = &list.Items[i]
	}
	return s, nil
}

// do makes one change. What another writer did first (the object gone, or
// changed since read) is no error: the next pass sees it.
func (c *Collector) do(ctx context.Context, md metadata.Interface, nss namespaceClient, st step) error {
	var err error
	switch st.kind {
	case deleteObject:
		err = c.delete(ctx, md, st.obj, st.propagation)
	case dropFinalizer:
		rest := slices.DeleteFunc(slices.Clone(st.obj.meta.Finalizers), func(f string) bool { return f == st.finalizer })
		err = patchMeta(ctx, md, st.obj, "finalizers", rest)
	case dropOwners:
		err = c.dropOwners(ctx, md, st.obj, st.owners)
	case checkOwners:
		err = c.checkOwners(ctx, md, st)
	case finalizeNamespace:
		ns := st.ns.DeepCopy()
		ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		_, err = nss.Finalize(ctx, ns, metav1.UpdateOptions{})
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (c *Collector) delete(ctx context.Context, md metadata.Interface, o *object, prop metav1.DeletionPropagation) error {
	uid := o.meta.UID
	err := md.Resource(o.res.gvr).Namespace(o.meta.Namespace).Delete(ctx, o.meta.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &prop})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s %s: %w", o.res.gvr.GroupResource(), klog.KRef(o.meta.Namespace, o.meta.Name), err)
	}
	return nil
}

func (c *Collector) dropOwners(ctx context.Context, md metadata.Interface, o *object, owners []metav1.OwnerReference) error {
	rest := slices.DeleteFunc(slices.Clone(o.meta.OwnerReferences), func(r metav1.OwnerReference) bool {
		return slices.ContainsFunc(owners, func(d metav1.OwnerReference) bool { return d.UID == r.UID })
	})
	return patchMeta(ctx, md, o, "ownerReferences", rest)
}

// patchMeta replaces one list of o's metadata, at the resourceVersion read
// (a conflict means someone else changed it: the next pass looks again).
func patchMeta[T any](ctx context.Context, md metadata.Interface, o *object, field string, value []T) error {
	var v any = value
	if len(value) == 0 {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": o.meta.ResourceVersion, field: v}})
	if err != nil {
		return err
	}
	_, err = md.Resource(o.res.gvr).Namespace(o.meta.Namespace).Patch(ctx, o.meta.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("removing %s from %s %s: %w", field, o.res.gvr.GroupResource(), klog.KRef(o.meta.Namespace, o.meta.Name), err)
	}
	return nil
}

// checkOwners reads each owner of st.obj the snapshot did not hold, from
// the plane (a quorum read), and deletes st.obj when none exists, or drops
// the owners that do not. An owner of a kind the plane does not know is
// taken to exist (as Kubernetes' collector leaves such a dependent alone).
func (c *Collector) checkOwners(ctx context.Context, md metadata.Interface, st step) error {
	o := st.obj
	var absent []metav1.OwnerReference
	for _, ref := range st.owners {
		gone, err := c.ownerGone(ctx, md, o, ref)
		if err != nil {
			return err
		}
		if gone {
			absent = append(absent, ref)
		}
	}
	switch {
	case len(absent) == 0:
		return nil
	case len(absent) == len(o.meta.OwnerReferences):
		return c.delete(ctx, md, o, metav1.DeletePropagationBackground)
	}
	return c.dropOwners(ctx, md, o, absent)
}

func (c *Collector) ownerGone(ctx context.Context, md metadata.Interface, o *object, ref metav1.OwnerReference) (bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false, nil
	}
	m, err := c.discovery.mapping(gv.WithKind(ref.Kind))
	if err != nil {
		return false, nil
	}
	ns := ""
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns = o.meta.Namespace
	}
	got, err := md.Resource(m.Resource).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsForbidden(err), apierrors.IsMethodNotSupported(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the owner %s %s of %s %s: %w", ref.Kind, ref.Name, o.res.gvr.GroupResource(), klog.KRef(o.meta.Namespace, o.meta.Name), err)
	}
	return got.UID != ref.UID, nil
}

// discovered is what the server serves that planes store, read through
// discovery and kept for discoveryFor (a new CRD is seen within it).
type discovered struct {
	client discovery.DiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu   sync.Mutex
	at   time.Time
	list []resource
}

const discoveryFor = 30 * time.Second

func newDiscovered(client discovery.DiscoveryInterface) *discovered {
	return &discovered{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client))}
}

func (d *discovered) resources() ([]resource, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.list != nil && time.Since(d.at) < discoveryFor {
		return d.list, nil
	}
	lists, err := d.client.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the resources control planes store: %w", err)
	}
	var out []resource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !planes.OwnStorage(gv.WithResource(r.Name).GroupResource()) || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			out = append(out, resource{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced})
		}
	}
	d.list, d.at = out, time.Now()
	return out, nil
}

// mapping is the resource of kind gvk, discovery read again once when it
// is not known.
func (d *discovered) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		d.mapper.Reset()
		m, err = d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}
