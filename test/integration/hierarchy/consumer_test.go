package hierarchy

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAGrantForAConsumerThatDoesNotExistIsWarned: a grant naming an
// Organization that does not exist — a typo of one that does — is accepted
// (a provisioning pipeline may write it first) with a warning that says so
// and names the organization meant; a grant naming one that exists gets no
// such warning.
func TestAGrantForAConsumerThatDoesNotExistIsWarned(t *testing.T) {
	w := newWorld(t)
	typo := strings.Replace(w.org, "acme", "acem", 1)
	warned := &quotatest.Warnings{}
	cfg := rest.CopyConfig(srv.Config)
	cfg.WarningHandler = warned
	c := quotatest.NewClient(t, cfg)
	ns := engine.DefaultOptions().SystemNamespace
	for _, tc := range []struct {
		name, consumer string
		want           string
	}{
		{"typo", typo, "there is no Organization " + typo + ", so this grant limits nothing until one is created; did you mean " + w.org + "?"},
		{"exists", w.org, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warned.Reset()
			g := w.grant(ns, "warn-"+tc.name+"-"+w.org, w.consumer("Organization", tc.consumer), 5)
			if err := c.Create(context.Background(), g); err != nil {
				t.Fatalf("a grant for Organization %s: %v; want it accepted", tc.consumer, err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), g) })
			got := warned.String()
			switch {
			case tc.want != "" && !warned.Contains(tc.want):
				t.Errorf("warnings %q; want one containing %q", got, tc.want)
			case tc.want == "" && strings.Contains(got, "there is no"):
				t.Errorf("a grant for an existing organization warned %q", got)
			}
		})
	}
}

// TestATenantIsNotToldOtherTenantsNames: an organization's owner who writes
// a grant naming a project that does not exist — a typo of another
// organization's project — is not told that project's name: the warning
// with the nearest name is the platform's alone.
func TestATenantIsNotToldOtherTenantsNames(t *testing.T) {
	other := newWorld(t, "secretproject")
	w := newWorld(t, "web")
	typo := other.projects[0] + "x"
	warned := &quotatest.Warnings{}
	cfg := rest.CopyConfig(w.ownerCfg)
	cfg.WarningHandler = warned
	c := quotatest.NewClient(t, cfg)
	g := w.grant(w.ns, "typo-"+w.org, w.consumer("Project", typo), 1)
	err := c.Create(context.Background(), g)
	if err == nil {
		t.Cleanup(func() { _ = w.admin.Delete(context.Background(), g) })
	}
	if got := warned.String(); strings.Contains(got, other.projects[0]) || strings.Contains(got, "did you mean") {
		t.Errorf("a tenant's grant for Project %s was answered with warnings %q: another organization's project name", typo, got)
	}
	if err != nil && strings.Contains(err.Error(), other.projects[0]+"?") {
		t.Errorf("a tenant's grant for Project %s was refused naming another organization's project: %v", typo, err)
	}
}
