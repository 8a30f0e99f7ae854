package claimpolicy

import (
	"context"
	"io"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"

	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaClaimPolicy"

// Register adds the plugin, bound to this process's engine. Objects in the
// system namespace and in exemptNamespaces are never charged
// (internal/policy/governed). created, when not nil, is given the charging
// component of each plugin made, so that QuotaReviews and member clusters'
// reviews are charged by the same one as the server's own requests.
func Register(plugins *admission.Plugins, handle *route.Handle, systemNamespace string, exemptNamespaces []string, created func(*charge.Charger)) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		p := &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update), Charger: charge.New(handle, systemNamespace, exemptNamespaces)}
		if created != nil {
			created(p.Charger)
		}
		return p, nil
	})
}

// Plugin enforces ClaimCreationPolicies at admission: every create and
// update is charged by the charging component, in Admit mode.
type Plugin struct {
	*admission.Handler
	*charge.Charger
}

var (
	_ admission.ValidationInterface                = &Plugin{}
	_ initializer.WantsDynamicClient               = &Plugin{}
	_ initializer.WantsExternalKubeClientSet       = &Plugin{}
	_ initializer.WantsAuthorizer                  = &Plugin{}
	_ initializer.WantsExternalKubeInformerFactory = &Plugin{}
	_ admission.InitializationValidator            = &Plugin{}
)

// ValidateInitialization implements admission.InitializationValidator.
func (p *Plugin) ValidateInitialization() error { return p.Ready() }

// Validate charges the request's object.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	_, err := p.Charge(ctx, charge.Request{Attributes: a, Objects: o, Mode: charge.Admit})
	return err
}
