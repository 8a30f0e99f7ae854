package quota

import "testing"

func TestPlacement(t *testing.T) {
	orgs := map[string]string{"web": "acme"}
	p := Placement{SystemNamespace: "quotaplane-system", OrganizationOf: func(project string) string { return orgs[project] }}
	for _, tc := range []struct {
		name     string
		consumer ConsumerID
		want     string
	}{
		{"an organization", ConsumerID{APIGroup: OrganizationGroup, Kind: "Organization", Name: "acme"}, "organization-acme"},
		{"a project, in its organization's namespace", ConsumerID{APIGroup: OrganizationGroup, Kind: "Project", Name: "web"}, "organization-acme"},
		{"a project not known", ConsumerID{APIGroup: OrganizationGroup, Kind: "Project", Name: "gone"}, "quotaplane-system"},
		{"a namespaced consumer", ConsumerID{APIGroup: "example.com", Kind: "Team", Name: "a", Namespace: "teams"}, "teams"},
		{"any other", ConsumerID{APIGroup: "example.com", Kind: "Team", Name: "a"}, "quotaplane-system"},
		{"a Project of another group", ConsumerID{APIGroup: "example.com", Kind: "Project", Name: "web"}, "quotaplane-system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Namespace(tc.consumer); got != tc.want {
				t.Fatalf("Namespace(%v) = %q, want %q", tc.consumer, got, tc.want)
			}
		})
	}
	if got := (Placement{SystemNamespace: "s"}).Namespace(ConsumerID{APIGroup: OrganizationGroup, Kind: "Project", Name: "web"}); got != "s" {
		t.Fatalf("without OrganizationOf a project's buckets are in the system namespace, got %q", got)
	}
}
