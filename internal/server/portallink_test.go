package server

import (
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// TestARefusalLinksOnlyWhereARequestCanBeFiled: a QuotaRequest names an
// Organization or a Project (it lives in the organization's namespace), so
// only their refusals link to the request form; a Namespace's refusal says
// to ask the platform for a ResourceGrant instead (quota.NoGrantMessage,
// the exceeded messages) and gets no link.
func TestARefusalLinksOnlyWhereARequestCanBeFiled(t *testing.T) {
	link := requestLink("https://quota.example.com/portal/")
	for _, tc := range []struct {
		consumer quota.ConsumerID
		want     string
	}{
		{quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Organization", Name: "acme"}, "kind=Organization"},
		{quota.ConsumerID{APIGroup: quota.OrganizationGroup, Kind: "Project", Name: "web"}, "kind=Project"},
		{quota.ConsumerID{Kind: "Namespace", Name: "dev"}, ""},
	} {
		got := link(tc.consumer, "core/configmaps")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("the link for %s: %q; want one containing %q", tc.consumer, got, tc.want)
		}
	}
	if requestLink("") != nil {
		t.Error("a server without a portal links to a form")
	}
}
