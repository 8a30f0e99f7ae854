package planes

import "testing"

func TestSplitPath(t *testing.T) {
	for _, tc := range []struct {
		path, rest string
		plane      Plane
		ok         bool
	}{
		{"/apis/resourcemanager.miloapis.com/v1alpha1/projects/web/control-plane/api/v1/namespaces", "/api/v1/namespaces", Plane{Kind: Projects, Name: "web"}, true},
		{"/apis/resourcemanager.miloapis.com/v1alpha1/organizations/acme/control-plane", "/", Plane{Kind: Organizations, Name: "acme"}, true},
		{"/apis/resourcemanager.miloapis.com/v1alpha1/projects/web/control-plane/", "/", Plane{Kind: Projects, Name: "web"}, true},
		{"/apis/resourcemanager.miloapis.com/v1alpha1/projects/web", "", Plane{}, false},
		{"/apis/resourcemanager.miloapis.com/v1alpha1/projects/web/status", "", Plane{}, false},
		{"/apis/resourcemanager.miloapis.com/v1alpha1/widgets/web/control-plane/api", "", Plane{}, false},
		{"/apis/resourcemanager.miloapis.com/v1alpha1/projects//control-plane/api", "", Plane{}, false},
		{"/api/v1/namespaces", "", Plane{}, false},
	} {
		p, rest, ok := SplitPath(tc.path)
		if ok != tc.ok || p != tc.plane || rest != tc.rest {
			t.Errorf("SplitPath(%q) = %+v, %q, %v; want %+v, %q, %v", tc.path, p, rest, ok, tc.plane, tc.rest, tc.ok)
		}
		if ok {
			back, _, _ := SplitPath(p.Path() + rest)
			if back != p {
				t.Errorf("%+v: Path does not round-trip: %q", p, p.Path())
			}
		}
	}
}

func TestParse(t *testing.T) {
	for s, ok := range map[string]bool{"projects/web": true, "organizations/acme": true, "projects/": false, "web": false, "clusters/x": false, "projects/a/b": false} {
		p, err := Parse(s)
		if (err == nil) != ok {
			t.Errorf("Parse(%q): %v", s, err)
		}
		if ok && p.String() != s {
			t.Errorf("Parse(%q).String() = %q", s, p.String())
		}
	}
	if got := (Plane{Kind: Projects, Name: "web"}).QuotaNamespace(); got != "project-web" {
		t.Errorf("a project's quota namespace is %q", got)
	}
	if got := (Plane{Kind: Organizations, Name: "acme"}).QuotaNamespace(); got != "organization-acme" {
		t.Errorf("an organization's quota namespace is %q", got)
	}
}

func TestServes(t *testing.T) {
	for path, want := range map[string]bool{
		"/api": true, "/api/v1": true, "/api/v1/namespaces/default/secrets": true, "/apis": true,
		"/apis/quota.miloapis.com/v1alpha1": true, "/openapi/v2": true, "/openapi/v3/api/v1": true, "/version": true,
		"/version/": true, "/healthz": true, "/healthz/ping": true, "/livez/etcd": true, "/readyz": true,
		"/": false, "": false, "/metrics": false, "/metrics/slis": false, "/debug/pprof/": false, "/debug/pprof/heap": false,
		"/quota/v1alpha1/clusters/east/review": false, "/openid/v1/jwks": false, "/.well-known/openid-configuration": false,
		"/portal/": false, "/apiss": false, "/versions": false, "/healthzz": false, "/api/../metrics": false,
		"/api/./v1": false, "/api//v1": false, "/apis/..": false, "api/v1": false,
	} {
		if got := Serves(path); got != want {
			t.Errorf("Serves(%q) = %v, want %v", path, got, want)
		}
	}
}
