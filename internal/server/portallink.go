package server

import (
	"net/url"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// requestLink is where a quota refusal sends a tenant to ask for more: the
// portal's request form for the consumer and resource type, prefilled. Only
// Organizations and Projects ask through the portal; other consumers get
// no link. The form finds a project's organization itself.
func requestLink(portalURL string) func(quota.ConsumerID, string) string {
	if portalURL == "" {
		return nil
	}
	return func(c quota.ConsumerID, resourceType string) string {
		if c.APIGroup != rmv1alpha1.GroupName || (c.Kind != "Organization" && c.Kind != "Project") {
			return ""
		}
		q := url.Values{"kind": {c.Kind}, "consumer": {c.Name}, "resourceType": {resourceType}}
		if c.Kind == "Organization" {
			q.Set("org", c.Name)
		}
		return portalURL + "#/request?" + q.Encode()
	}
}
