package planeserve

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// Registry knows which planes exist: one per Ready Organization and
// Project, read from informers started with the server. It prepares a
// plane the first time it is used (its namespaces), lazily: an idle plane
// costs nothing but its owner's entry in the informers.
type Registry struct {
	// SystemNamespace is made in every plane, for its quota objects.
	SystemNamespace string

	synced         atomic.Bool
	orgs, projects toolscache.SharedIndexInformer
	loopback       *rest.Config

	mu       sync.Mutex
	prepared map[string]*preparing
	kube     map[string]kubernetes.Interface

	// namespaces is NamespaceLifecycle's memory of the planes' namespaces.
	namespaces seenNamespaces
}

// namespaceDeleted is told by a plane's storage that namespace name of p
// is being deleted, or is gone: creates in it are refused from now on.
func (r *Registry) namespaceDeleted(p planes.Plane, name string) {
	r.namespaces.forget(string(p.UID) + "/" + name)
}

// preparing is a plane being prepared, or prepared.
type preparing struct {
	done chan struct{}
	err  error
}

// NewRegistry makes a registry; Start starts it.
func NewRegistry(systemNamespace string) *Registry {
	return &Registry{SystemNamespace: systemNamespace, prepared: map[string]*preparing{}, kube: map[string]kubernetes.Interface{}}
}

// Start starts the informers of Organizations and Projects (a server
// Component): requests to planes are answered 503 until they have synced.
func (r *Registry) Start(ctx context.Context, loopback *rest.Config) error {
	s := runtime.NewScheme()
	if err := rmv1alpha1.AddToScheme(s); err != nil {
		return err
	}
	cl, err := client.NewWithWatch(loopback, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	r.loopback = rest.CopyConfig(loopback)
	r.orgs = informer(cl, &rmv1alpha1.Organization{}, &rmv1alpha1.OrganizationList{})
	r.projects = informer(cl, &rmv1alpha1.Project{}, &rmv1alpha1.ProjectList{})
	go r.orgs.RunWithContext(ctx)
	go r.projects.RunWithContext(ctx)
	go func() {
		if toolscache.WaitForCacheSync(ctx.Done(), r.orgs.HasSynced, r.projects.HasSynced) {
			r.synced.Store(true)
		}
	}()
	return nil
}

func informer(cl client.WithWatch, obj client.Object, list client.ObjectList) toolscache.SharedIndexInformer {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return l, cl.List(ctx, l, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cl.Watch(ctx, list.DeepCopyObject().(client.ObjectList), &client.ListOptions{Raw: &opts})
		},
	}
	return toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
}

// statusError is an answer to a request to a plane that cannot be served.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// Owner returns the object that owns plane p, from the informers (nil when
// it does not exist).
func (r *Registry) Owner(p planes.Plane) (client.Object, error) {
	if !r.synced.Load() {
		return nil, &statusError{http.StatusServiceUnavailable, "the control planes are starting: the server has not read the organizations and projects yet; retry in a moment"}
	}
	inf := r.projects
	if p.Kind == planes.Organizations {
		inf = r.orgs
	}
	obj, found, err := inf.GetStore().GetByKey(p.Name)
	if err != nil || !found {
		return nil, err
	}
	return obj.(client.Object), nil
}

// OrganizationOf is the organization of the project whose plane p is, ""
// when not known; p itself for an organization's plane.
func (r *Registry) OrganizationOf(p planes.Plane) string {
	if p.Kind == planes.Organizations {
		return p.Name
	}
	o, err := r.Owner(p)
	if err != nil || o == nil {
		return ""
	}
	return o.(*rmv1alpha1.Project).Spec.OwnerRef.Name
}

// Resolve returns plane p with its owner's UID when the owner is Ready and
// not being deleted, and otherwise why the plane cannot be used.
func (r *Registry) Resolve(p planes.Plane) (planes.Plane, error) {
	owner, err := r.Owner(p)
	if err != nil {
		return p, err
	}
	what := p.OwnerKind() + " " + p.Name
	if owner == nil {
		return p, &statusError{http.StatusNotFound, fmt.Sprintf("the control plane of %s does not exist: no %s of that name exists (kubectl get %s)", what, p.OwnerKind(), p.Kind)}
	}
	if owner.GetDeletionTimestamp() != nil {
		return p, &statusError{http.StatusNotFound, fmt.Sprintf("the control plane of %s is being removed with it", what)}
	}
	var conds []metav1.Condition
	switch o := owner.(type) {
	case *rmv1alpha1.Project:
		conds = o.Status.Conditions
	case *rmv1alpha1.Organization:
		conds = o.Status.Conditions
	}
	if c := meta.FindStatusCondition(conds, rmv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		why := "it has not been reconciled yet"
		if c != nil {
			why = c.Reason + ": " + c.Message
		}
		return p, &statusError{http.StatusServiceUnavailable, fmt.Sprintf("the control plane of %s is not ready: %s is not Ready (%s); retry once it is (kubectl get %s %s)", what, what, why, p.Kind, p.Name)}
	}
	p.UID = owner.GetUID()
	return p, nil
}

// Current reports whether plane p (with its UID) is still served: false
// when its owner is gone, being deleted, or another object of that name;
// an error while that is not known (the server starting, the owner not
// Ready).
func (r *Registry) Current(p planes.Plane) (bool, error) {
	owner, err := r.Owner(p)
	switch {
	case err != nil:
		return false, err
	case owner == nil || owner.GetDeletionTimestamp() != nil || owner.GetUID() != p.UID:
		return false, nil
	}
	if _, err := r.Resolve(p); err != nil {
		return false, err
	}
	return true, nil
}

// Prepare makes plane p's namespaces (default and the system namespace)
// the first time the plane is used by this server; concurrent first
// requests wait for one preparation.
func (r *Registry) Prepare(ctx context.Context, p planes.Plane) error {
	key := string(p.UID)
	r.mu.Lock()
	pr, ok := r.prepared[key]
	if !ok || (pr.err != nil && isDone(pr.done)) {
		pr = &preparing{done: make(chan struct{})}
		r.prepared[key] = pr
		r.mu.Unlock()
		pr.err = r.prepare(ctx, p)
		if pr.err == nil {
			inUse.WithLabelValues(string(p.Kind)).Inc()
		}
		close(pr.done)
		return pr.err
	}
	r.mu.Unlock()
	select {
	case <-pr.done:
		return pr.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (r *Registry) prepare(ctx context.Context, p planes.Plane) error {
	kube, err := r.Kube(p)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, ns := range []string{metav1.NamespaceDefault, r.SystemNamespace} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("preparing the control plane of %s %s: creating its namespace %s: %w", p.OwnerKind(), p.Name, ns, err)
		}
	}
	return nil
}

// Kube is a privileged client of plane p (the loopback's credentials).
func (r *Registry) Kube(p planes.Plane) (kubernetes.Interface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.kube[p.String()]; ok {
		return k, nil
	}
	if r.loopback == nil {
		return nil, &statusError{http.StatusServiceUnavailable, "the control planes are starting; retry in a moment"}
	}
	k, err := kubernetes.NewForConfig(planes.ConfigFor(r.loopback, p))
	if err != nil {
		return nil, err
	}
	r.kube[p.String()] = k
	return k, nil
}

// Owners are the informers of the planes' owners: Projects, then
// Organizations (started by Start).
func (r *Registry) Owners() []toolscache.SharedIndexInformer {
	return []toolscache.SharedIndexInformer{r.projects, r.orgs}
}

// Loopback is the server's own client configuration (set by Start).
func (r *Registry) Loopback() *rest.Config { return r.loopback }

// Forget drops what the registry keeps of a removed plane.
func (r *Registry) Forget(p planes.Plane) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pr, ok := r.prepared[string(p.UID)]; ok && isDone(pr.done) && pr.err == nil {
		inUse.WithLabelValues(string(p.Kind)).Dec()
	}
	delete(r.prepared, string(p.UID))
	delete(r.kube, p.String())
}
