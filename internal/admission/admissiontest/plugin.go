package admissiontest

import (
	"testing"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
)

// NewPlugin builds the plugin that register registers under name, given
// client and az as the server's plugin initializer gives them, and checked
// as the admission chain checks it.
func NewPlugin(t testing.TB, register func(*admission.Plugins), name string, client dynamic.Interface, az authorizer.Authorizer) admission.Interface {
	t.Helper()
	plugins := admission.NewPlugins()
	register(plugins)
	p, err := plugins.InitPlugin(name, nil, initialize{client: client, authorizer: az})
	if err != nil {
		t.Fatalf("initializing %s: %v", name, err)
	}
	return p
}

// initialize gives a plugin what it wants, as initializer.New does.
type initialize struct {
	client     dynamic.Interface
	authorizer authorizer.Authorizer
}

func (i initialize) Initialize(p admission.Interface) {
	if w, ok := p.(initializer.WantsDynamicClient); ok {
		w.SetDynamicClient(i.client)
	}
	if w, ok := p.(initializer.WantsAuthorizer); ok {
		w.SetAuthorizer(i.authorizer)
	}
}
