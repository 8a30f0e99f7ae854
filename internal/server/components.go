package server

import "github.com/quotaplane/quotaplane/internal/engine"

// QuotaComponents are the controllers serve runs next to the API server: the
// quota engine and the controllers that act on the quota and tenancy kinds.
// Tests that start the server the way serve does use the same list.
func QuotaComponents(engineOpts engine.Options) []Component {
	return []Component{engine.Start(engineOpts)}
}
