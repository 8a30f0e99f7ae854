package plugininit

import (
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// PlaneClients makes a dynamic client of a control plane: the objects a
// plane stores are read through its URL (docs/control-planes.md).
type PlaneClients func(planes.Plane) (dynamic.Interface, error)

// WantsPlaneClients is a plugin that reads objects stored in control
// planes.
type WantsPlaneClients interface {
	SetPlaneClients(PlaneClients)
}

// NewPlanesInitializer gives the plugins that want them clients of the
// control planes, with the credentials of loopback (the server's own).
func NewPlanesInitializer(loopback *rest.Config) admission.PluginInitializer {
	clients := planes.NewClients(loopback)
	return planesInitializer{clients: func(p planes.Plane) (dynamic.Interface, error) { return clients.Dynamic(p) }}
}

type planesInitializer struct {
	clients PlaneClients
}

// Initialize implements admission.PluginInitializer.
func (i planesInitializer) Initialize(p admission.Interface) {
	if w, ok := p.(WantsPlaneClients); ok {
		w.SetPlaneClients(i.clients)
	}
}
