package portal

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// get asks serve's portal for path with token ("" for none).
func get(t *testing.T, path, token string) (*http.Response, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(rest.AnonymousClientConfig(srv.Config))
	if err != nil {
		t.Fatal(err)
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodGet, srv.Config.Host+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var inlineScript = regexp.MustCompile(`(?s)<script([^>]*)>(.*?)</script>`)

// TestPortalSecurityHeaders: every answer of the portal, pages and API,
// forbids framing, sends no referrer, and has a Content-Security-Policy
// that allows only the portal's own scripts: the page's one inline script
// (its import map) by its hash, no 'unsafe-inline', no eval, nothing from
// another origin.
func TestPortalSecurityHeaders(t *testing.T) {
	_, index := get(t, "/portal/", "")
	for _, path := range []string{"/portal", "/portal/", "/portal/app.js", "/portal/vendor/preact/preact.module.js", "/portal/style.css",
		"/portal/api/whoami", "/portal/api/nothing"} {
		resp, _ := get(t, path, "")
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s (%d): Content-Security-Policy %q lacks %q", path, resp.StatusCode, csp, want)
			}
		}
		for _, never := range []string{"unsafe-inline", "unsafe-eval", "*", "http:", "https:"} {
			if strings.Contains(csp, never) {
				t.Errorf("%s: Content-Security-Policy %q allows %q", path, csp, never)
			}
		}
		if got := h.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("%s: Referrer-Policy %q, want no-referrer", path, got)
		}
		if got := h.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", path, got)
		}
		if path == "/portal/" {
			scripts := inlineScript.FindAllStringSubmatch(index, -1)
			inline := 0
			for _, s := range scripts {
				if strings.Contains(s[1], "src=") {
					continue
				}
				inline++
				sum := sha256.Sum256([]byte(s[2]))
				if hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, hash) {
					t.Errorf("the page's inline script %.40q... is not allowed by its hash %s in %q", s[2], hash, csp)
				}
			}
			if inline == 0 {
				t.Errorf("the page has no inline script; the test expects its import map:\n%s", index)
			}
		}
	}
}

// TestLocateSaysTheSameForUnknownAndNotYours: /portal/api/locate answers a
// project of another organization exactly as it answers a project that does
// not exist, so a tenant cannot learn which projects exist.
func TestLocateSaysTheSameForUnknownAndNotYours(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000)
	mine, theirs := "loc-mine-"+suffix, "loc-theirs-"+suffix
	for _, org := range []string{mine, theirs} {
		if err := admin.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return admin.Get(ctx, client.ObjectKey{Name: rmv1alpha1.OrganizationNamespace(org)}, &corev1.Namespace{}) == nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: org + "-web"},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}}); err != nil {
			t.Fatal(err)
		}
	}
	ns := rmv1alpha1.OrganizationNamespace(mine)
	token, _ := quotatest.ServiceAccountToken(t, srv.Config, ns, "owner", rmv1alpha1.OrganizationOwnerRole, ns)
	// The portal reads projects from its informer: wait for its own to be
	// located.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		resp, _ := get(t, "/portal/api/locate?project="+mine+"-web", token)
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("locating the tenant's own project: %v", err)
	}
	notYours, notYoursBody := get(t, "/portal/api/locate?project="+theirs+"-web", token)
	unknown, unknownBody := get(t, "/portal/api/locate?project=loc-nobody-"+suffix+"-web", token)
	same := func(body, name string) string { return strings.ReplaceAll(body, name, "<project>") }
	if notYours.StatusCode != unknown.StatusCode || same(notYoursBody, theirs+"-web") != same(unknownBody, "loc-nobody-"+suffix+"-web") {
		t.Fatalf("locate tells another organization's project from an unknown one:\n not yours: %d %s\n unknown:   %d %s",
			notYours.StatusCode, notYoursBody, unknown.StatusCode, unknownBody)
	}
	if notYours.StatusCode != http.StatusNotFound {
		t.Errorf("locating another organization's project: %d, want 404", notYours.StatusCode)
	}
}
