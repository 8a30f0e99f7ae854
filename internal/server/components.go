package server

import (
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/grantpolicy"
)

// QuotaComponents are the controllers serve runs next to the API server: the
// quota engine and the controllers that act on the quota and tenancy kinds.
// Tests that start the server the way serve does use the same list.
func QuotaComponents(engineOpts engine.Options) []Component {
	return []Component{engine.Start(engineOpts), grantpolicy.Start(grantPolicyOptions(engineOpts))}
}

// grantPolicyOptions run the grant engine on its own Lease next to the quota
// engine: the same system namespace, identity and election timings.
func grantPolicyOptions(eo engine.Options) grantpolicy.Options {
	o := grantpolicy.DefaultOptions()
	if eo.SystemNamespace != "" {
		o.SystemNamespace = eo.SystemNamespace
	}
	o.Identity = eo.Identity
	o.Metrics = eo.Exporter
	if eo.LeaseDuration > 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = eo.LeaseDuration, eo.RenewDeadline, eo.RetryPeriod
	}
	return o
}
