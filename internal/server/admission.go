package server

import (
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	mutatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
	"k8s.io/kubernetes/plugin/pkg/admission/serviceaccount"

	"github.com/quotaplane/quotaplane/internal/admission/amounts"
	"github.com/quotaplane/quotaplane/internal/admission/claimcreator"
	"github.com/quotaplane/quotaplane/internal/admission/claimguard"
	"github.com/quotaplane/quotaplane/internal/admission/claimpolicy"
	"github.com/quotaplane/quotaplane/internal/admission/delegation"
	"github.com/quotaplane/quotaplane/internal/admission/ownerns"
	"github.com/quotaplane/quotaplane/internal/admission/policycheck"
	"github.com/quotaplane/quotaplane/internal/admission/quotarequest"
	"github.com/quotaplane/quotaplane/internal/admission/registration"
	"github.com/quotaplane/quotaplane/internal/admission/resourcemanager"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/server/nativeapi"
)

// quotaPlugins are quotaplane's own admission plugins, run just before the
// built-in ResourceQuota, after every other validating step. Tenancy comes
// first: a Project's label and ownerReference are set before a
// ClaimCreationPolicy renders its claims. The claim guard validates before
// the claim creator: a dry-run claim is answered with the engine's numbers
// (ClaimCreator's Validate) only once its requester may claim its consumer,
// so a caller without verb claim gets the authorization refusal and nothing
// else (TestADryRunClaimAnswersOnlyAfterAuthorization).
var quotaPlugins = []string{nativeapi.PluginName, resourcemanager.PluginName, amounts.PluginName, delegation.PluginName, registration.PluginName, policycheck.PluginName, quotarequest.PluginName, claimguard.PluginName, claimcreator.PluginName, claimpolicy.PluginName}

// registerQuotaAdmission registers quotaplane's plugins and puts them in the
// admission order. Without an engine handle, ClaimCreationPolicies are not
// enforced at admission (the plugin is registered but disabled).
func registerQuotaAdmission(o *genericoptions.AdmissionOptions, handle *route.Handle, opts *Options, reviews func(*charge.Charger)) {
	systemNamespace := opts.SystemNamespace
	nativeapi.RegisterAdmission(o.Plugins, !opts.CRDStorage)
	ownerns.Register(o.Plugins)
	resourcemanager.Register(o.Plugins)
	amounts.Register(o.Plugins)
	delegation.Register(o.Plugins, delegation.Config{Handle: handle, SystemNamespace: systemNamespace, PlatformNamespaces: opts.PlatformNamespaces, ReservedLabelPrefix: opts.ReservedLabelPrefix})
	registration.Register(o.Plugins)
	policycheck.Register(o.Plugins)
	quotarequest.Register(o.Plugins)
	claimcreator.Register(o.Plugins, handle)
	claimguard.Register(o.Plugins, systemNamespace, handle != nil)
	if handle != nil {
		claimpolicy.Register(o.Plugins, handle, systemNamespace, opts.ExemptNamespaces, reviews)
	} else {
		o.DisablePlugins = append(o.DisablePlugins, claimpolicy.PluginName)
		claimpolicy.Register(o.Plugins, route.NewHandle(), systemNamespace, opts.ExemptNamespaces, nil)
	}
	var order []string
	for _, name := range o.RecommendedPluginOrder {
		if name == lifecycle.PluginName {
			// First: a create into a tenant's namespace not made yet waits
			// for it, or is answered retryable, before NamespaceLifecycle
			// would answer 404.
			order = append(order, ownerns.PluginName)
		}
		if name == resourcequota.PluginName {
			order = append(order, quotaPlugins...)
		}
		order = append(order, name)
	}
	o.RecommendedPluginOrder = order
}

// enabledAdmissionPlugins are the upstream admission plugins that make sense
// without nodes (Pods are stored, never run). Every other upstream plugin is
// off by default.
var enabledAdmissionPlugins = sets.New(
	ownerns.PluginName,
	lifecycle.PluginName,
	serviceaccount.PluginName,
	mutatingwebhook.PluginName,
	validatingwebhook.PluginName,
	resourcequota.PluginName,
	validatingadmissionpolicy.PluginName,
	mutatingadmissionpolicy.PluginName,
)

func defaultOffAdmissionPlugins() sets.Set[string] {
	return sets.New(kubeoptions.AllOrderedPlugins...).Difference(enabledAdmissionPlugins.Union(sets.New(quotaPlugins...)))
}
