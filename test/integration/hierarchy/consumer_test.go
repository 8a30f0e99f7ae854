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
