package ownerns

import (
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// PluginName is the admission plugin's name. It runs first, ahead of
// NamespaceLifecycle, which would answer 404 for the namespace.
const PluginName = "TenantNamespaces"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &Plugin{Handler: admission.NewHandler(admission.Create)}, nil
	})
}

// Plugin holds a create into a tenant's namespace that is not made yet
// (Waiter.Await).
type Plugin struct {
	*admission.Handler
	w      Waiter
	synced func() bool
}

var (
	_ admission.MutationInterface                  = &Plugin{}
	_ admission.InitializationValidator            = &Plugin{}
	_ initializer.WantsExternalKubeInformerFactory = &Plugin{}
	_ initializer.WantsExternalKubeClientSet       = &Plugin{}
	_ initializer.WantsDynamicClient               = &Plugin{}
)

// SetExternalKubeInformerFactory implements initializer.WantsExternalKubeInformerFactory.
func (p *Plugin) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	inf := f.Core().V1().Namespaces()
	p.w.Namespaces, p.synced = inf.Lister(), inf.Informer().HasSynced
}

// SetExternalKubeClientSet implements initializer.WantsExternalKubeClientSet.
func (p *Plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.w.Kube = c }

// SetDynamicClient implements initializer.WantsDynamicClient.
func (p *Plugin) SetDynamicClient(c dynamic.Interface) { p.w.Dynamic = c }

// ValidateInitialization implements admission.InitializationValidator.
func (p *Plugin) ValidateInitialization() error {
	if p.w.Namespaces == nil || p.w.Kube == nil || p.w.Dynamic == nil {
		return fmt.Errorf("%s needs the namespace informer, a client and a dynamic client", PluginName)
	}
	return nil
}

// Admit waits for, or refuses with a retryable status, a create into a
// tenant's namespace that does not exist yet. Anything else passes: a
// namespace that exists (one lookup in the informer), one that is no
// tenant's or is being deleted (NamespaceLifecycle answers), and requests
// to a plane (its namespaces are its own).
func (p *Plugin) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	ns := a.GetNamespace()
	if ns == "" || a.GetSubresource() != "" || (a.GetKind().Group == "" && a.GetKind().Kind == "Namespace") || !p.synced() {
		return nil
	}
	if _, err := p.w.Namespaces.Get(ns); err == nil {
		return nil
	}
	if _, ok := OwnerOf(ns); !ok {
		return nil
	}
	if _, inPlane := planes.From(ctx); inPlane {
		return nil
	}
	what := fmt.Sprintf("this %s", a.GetKind().Kind)
	if err := p.w.Await(ctx, ns, what, a.GetResource().GroupResource(), a.GetName()); err != nil && !errors.Is(err, ErrNotOwned) {
		return err
	}
	return nil
}
