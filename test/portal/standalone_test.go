package portal

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/internal/portal"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestStandalonePortal: `quotaplane portal` next to a cluster (here serve,
// reached through its admin kubeconfig, as it would reach any cluster)
// serves the pages, answers whoami, and passes /apis to the cluster with
// the user's own token — never with its own credentials.
func TestStandalonePortal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := portal.New(portal.Options{SystemNamespace: "quotaplane-system"})
	if err := p.Start(ctx, srv.Config); err != nil {
		t.Fatal(err)
	}
	h, err := p.Handler(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	web := httptest.NewServer(h)
	defer web.Close()
	token, user := quotatest.ServiceAccountToken(t, srv.Config, "default", "standalone-staff", "quotaplane-quota-approver", "")
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, web.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := web.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/portal/", ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("the pages: %d %.200s", code, body)
	}
	code, body := get("/portal/api/whoami", token)
	var me struct {
		User  string `json:"user"`
		Staff bool   `json:"staff"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &me) != nil || me.User != user || !me.Staff {
		t.Fatalf("whoami: %d %s", code, body)
	}
	const buckets = "/apis/quota.miloapis.com/v1alpha1/allowancebuckets?limit=1"
	if code, body := get(buckets, token); code != http.StatusOK || !strings.Contains(body, `"kind":"AllowanceBucketList"`) {
		t.Fatalf("the API as the user: %d %.300s", code, body)
	}
	if code, _ := get(buckets, ""); code == http.StatusOK {
		t.Fatal("the API without a token answered 200: the portal must not lend its own credentials")
	}
	if code, _ := get("/apis/quota.miloapis.com/v1alpha1/allowancebuckets", "not-a-token"); code != http.StatusUnauthorized {
		t.Fatalf("a bad token: want 401, got %d", code)
	}
}
