package planeserve

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// AdmissionDecorator makes the upstream admission plugins that read the
// root's objects plane-aware: in a plane, NamespaceLifecycle checks the
// plane's namespaces; ResourceQuota (the root's ResourceQuota objects) and
// ServiceAccount (no service account controller runs in a plane) do not
// apply. Every other plugin is left as it is.
func AdmissionDecorator(reg *Registry) admission.Decorator {
	ns := &namespaces{reg: reg}
	return admission.DecoratorFunc(func(h admission.Interface, name string) admission.Interface {
		switch name {
		case lifecycle.PluginName:
			return wrap(h, ns.check)
		case resourcequota.PluginName, serviceaccount.PluginName:
			return wrap(h, func(context.Context, planes.Plane, admission.Attributes) error { return nil })
		}
		return h
	})
}

// inPlane replaces a plugin for requests to planes.
type inPlane struct {
	admission.Interface
	plane func(context.Context, planes.Plane, admission.Attributes) error
}

type mutatingInPlane struct{ inPlane }

func (w mutatingInPlane) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if _, ok := planes.From(ctx); ok {
		return nil
	}
	return w.Interface.(admission.MutationInterface).Admit(ctx, a, o)
}

func (w inPlane) validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if p, ok := planes.From(ctx); ok {
		return w.plane(ctx, p, a)
	}
	return w.Interface.(admission.ValidationInterface).Validate(ctx, a, o)
}

type validatingInPlane struct{ inPlane }

func (w validatingInPlane) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return w.validate(ctx, a, o)
}

type bothInPlane struct{ mutatingInPlane }

func (w bothInPlane) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return w.validate(ctx, a, o)
}

func wrap(h admission.Interface, plane func(context.Context, planes.Plane, admission.Attributes) error) admission.Interface {
	_, m := h.(admission.MutationInterface)
	_, v := h.(admission.ValidationInterface)
	w := inPlane{Interface: h, plane: plane}
	switch {
	case m && v:
		return bothInPlane{mutatingInPlane{w}}
	case m:
		return mutatingInPlane{w}
	case v:
		return validatingInPlane{w}
	}
	return h
}

// namespaces checks, for a request to a plane, that the namespace an
// object is created in exists in the plane and is not being deleted.
type namespaces struct {
	reg *Registry
}

// namespaceSeenFor is how long a namespace seen in a plane is trusted to
// still exist and not be terminating, unless this server sees it deleted
// first (Registry.namespaceDeleted); another replica's deletion is seen
// within it.
const namespaceSeenFor = 5 * time.Second

// seenNamespaces are the namespaces of planes recently seen to exist.
type seenNamespaces struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (s *seenNamespaces) recently(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.seen[key]
	return ok && time.Since(at) < namespaceSeenFor
}

func (s *seenNamespaces) saw(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil || len(s.seen) > 100000 {
		s.seen = map[string]time.Time{}
	}
	s.seen[key] = time.Now()
}

func (s *seenNamespaces) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, key)
}

func (n *namespaces) check(ctx context.Context, p planes.Plane, a admission.Attributes) error {
	ns := a.GetNamespace()
	if a.GetOperation() != admission.Create || ns == "" || (a.GetKind().Group == "" && a.GetKind().Kind == "Namespace") {
		return nil
	}
	key := string(p.UID) + "/" + ns
	if n.reg.namespaces.recently(key) {
		return nil
	}
	kube, err := n.reg.Kube(p)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(corev1.Resource("namespaces"), ns)
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("reading namespace %s of control plane %s: %w", ns, p, err))
	case got.Status.Phase == corev1.NamespaceTerminating:
		return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	n.reg.namespaces.saw(key)
	return nil
}
