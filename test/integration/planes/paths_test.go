package planes

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/peer"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/server/planeserve"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// memberConfig is a real token of service account name in the
// organization's namespace, bound to the shipped ClusterRole
// quotaplane-project-member in project-<project>, once it may use the
// project's plane.
func memberConfig(t *testing.T, org, project, name string) *rest.Config {
	t.Helper()
	cfg := tokenConfig(t, rmv1alpha1.OrganizationNamespace(org), name, planeserve.MemberRole, planes.ProjectNamespace(project))
	eventually(t, 10*time.Second, name+" bound as a member of "+project, func(ctx context.Context) error {
		return canUse(ctx, cfg, projectPlane(project))
	})
	return cfg
}

// call sends method to path within plane p (the root when p is nil) as cfg
// and returns the status code and the start of the body.
func call(t *testing.T, cfg *rest.Config, p *planes.Plane, method, path string, body []byte) (int, string) {
	t.Helper()
	if p != nil {
		cfg = planeConfig(cfg, *p)
	}
	hc, err := rest.HTTPClientFor(cfg)
	must(t, err, "an HTTP client")
	req, err := http.NewRequest(method, strings.TrimSuffix(cfg.Host, "/")+path, bytes.NewReader(body))
	must(t, err, "a request of %s", path)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	must(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode, string(b)
}

// A plane serves its API, discovery, OpenAPI, /version and health, and
// nothing else of the root's: a project member (a real token, the shipped
// member role) posting a member cluster's AdmissionReview through its
// plane's URL charges no one, and the root's /metrics and /debug/pprof are
// 404 in a plane even for system:masters (issue 33, hole 1).
func TestRootEndpointsAreNotServedInPlanes(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t, "rootpath", "rootpath-owner")
	tn.project(t, "rootpath-web")
	plane := projectPlane("rootpath-web")
	member := memberConfig(t, "rootpath", "rootpath-web", "dev")

	// Another organization's quota, charged by member cluster east's
	// reviews of Secrets in the fixture's namespace, asked by a user who may
	// charge it.
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	f.SecretsPolicy(5)
	const cluster = "rootpath-east"
	must(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(cluster)}}), "creating the cluster's namespace")
	const charger = "rootpath-charger"
	must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: charger}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{f.Org.APIGroup}, Resources: []string{"organizations"}, ResourceNames: []string{f.Org.Name}, Verbs: []string{"claim"}}}}), "a role charging %s", f.Org.Name)
	// The cluster's user charger is <cluster>:charger in the quota plane
	// (members.MemberName), whatever the review sends.
	inPlane := members.MemberName(cluster, charger, true)
	must(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: charger},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: inPlane}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: charger}}), "binding %s", inPlane)
	// The review is authorized by RBAC's cache: wait until it has the binding.
	quotatest.WaitAllowed(t, []kubernetes.Interface{kubernetes.NewForConfigOrDie(srv.Config)}, inPlane, nil,
		&authorizationv1.ResourceAttributes{Verb: "claim", Group: f.Org.APIGroup, Resource: "organizations", Name: f.Org.Name})
	review := func(name string) []byte {
		return createReview(t, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}}, "secrets", charger)
	}
	for who, cfg := range map[string]*rest.Config{"a project member": member, "system:masters": srv.Config} {
		if code, body := call(t, cfg, &plane, http.MethodPost, members.ReviewPath(cluster), review("via-plane-"+strings.ReplaceAll(who, " ", "-"))); code != http.StatusNotFound {
			t.Errorf("%s posting a member cluster's review through a plane: %d %s, want 404", who, code, body)
		}
	}
	// The same review at the root, as the root's administrator, charges:
	// the bucket shows that one alone.
	code, body := call(t, srv.Config, nil, http.MethodPost, members.ReviewPath(cluster), review("at-root"))
	if code != http.StatusOK || !strings.Contains(body, `"allowed":true`) {
		t.Fatalf("the review at the root: %d %s, want allowed", code, body)
	}
	f.WaitBucket(quotatest.N(5, 1, 4), "secrets")
	claims := &quotav1alpha1.ResourceClaimList{}
	must(t, admin.List(ctx, claims, client.InNamespace(members.Namespace(cluster))), "listing the cluster's claims")
	if len(claims.Items) != 1 {
		t.Errorf("%d claims of cluster %s, want the root's review's 1 only", len(claims.Items), cluster)
	}

	// The root's own endpoints are 404 in a plane, whatever the identity.
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/flags/v", "/", "/api/../metrics",
		"/openid/v1/jwks", "/portal/", members.ReviewPrefix} {
		for who, cfg := range map[string]*rest.Config{"a project member": member, "system:masters": srv.Config} {
			if code, body := call(t, cfg, &plane, http.MethodGet, path, nil); code != http.StatusNotFound {
				t.Errorf("%s reading %s through a plane: %d %.120s, want 404", who, path, code, body)
			}
		}
	}
	if code, _ := call(t, srv.Config, nil, http.MethodGet, "/metrics", nil); code != http.StatusOK {
		t.Errorf("/metrics at the root for system:masters: %d, want 200", code)
	}
}

// Discovery, OpenAPI, /version and health answer in a plane to who may use
// it (a project member) and to whoever its RBAC binds (a guest bound by a
// Role in the plane), as system:discovery does at the root; not to anyone
// else.
func TestPlaneServesDiscoveryVersionAndHealth(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t, "disco", "disco-owner")
	tn.project(t, "disco-web")
	plane := projectPlane("disco-web")
	member := memberConfig(t, "disco", "disco-web", "dev")

	// A guest, bound by a Role of the plane only.
	// rbac: no wait: a plane's RBAC reads its bindings through the plane's API, no cache (planeserve.planeRBAC).
	guest := tokenFor(t, "organization-disco", "guest")
	web := kubernetes.NewForConfigOrDie(planeConfig(srv.Config, plane))
	_, err := web.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-config"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	must(t, err, "a Role in the plane")
	_, err = web.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guest"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "organization-disco", Name: "guest"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-config"}}, metav1.CreateOptions{})
	must(t, err, "binding the guest in the plane")
	stranger := tokenFor(t, "organization-disco", "stranger")

	paths := []string{"/api", "/api/v1", "/apis", "/apis/" + quotav1alpha1.SchemeGroupVersion.String(), "/openapi/v2", "/openapi/v3",
		"/openapi/v3/api/v1", "/version", "/healthz", "/healthz/ping", "/livez", "/readyz", "/readyz/ping"}
	for who, cfg := range map[string]*rest.Config{"a project member": member, "a guest bound by the plane's RBAC": guest} {
		for _, path := range paths {
			if code, body := call(t, cfg, &plane, http.MethodGet, path, nil); code != http.StatusOK {
				t.Errorf("%s reading %s in its plane: %d %.200s, want 200", who, path, code, body)
			}
		}
		if _, err := kubernetes.NewForConfigOrDie(planeConfig(cfg, plane)).Discovery().ServerPreferredResources(); err != nil {
			t.Errorf("%s discovering the plane's resources: %v", who, err)
		}
		if code, _ := call(t, cfg, &plane, http.MethodGet, "/metrics", nil); code != http.StatusNotFound {
			t.Errorf("%s reading /metrics in its plane: %d, want 404", who, code)
		}
	}
	for _, path := range []string{"/version", "/apis", "/healthz"} {
		if code, _ := call(t, stranger, &plane, http.MethodGet, path, nil); code != http.StatusForbidden {
			t.Errorf("a user neither allowed in the plane nor bound by it reading %s there: %d, want 403", path, code)
		}
	}
}

// The peer listener's decision paths are served on their own listener,
// never by the API: posting a decision there — at the root or through a
// plane, as a project member or as system:masters — reaches no engine
// (docs/security.md, "Identities": a replica).
func TestPeerPathsAreNotServedOnTheAPI(t *testing.T) {
	tn := newTenant(t, "peerpath", "peerpath-owner")
	tn.project(t, "peerpath-web")
	plane := projectPlane("peerpath-web")
	member := memberConfig(t, "peerpath", "peerpath-web", "dev")
	body := []byte(`{"session":"s","claims":[]}`)
	for _, path := range []string{peer.CreatePath, peer.UpdatePath, peer.BudgetPath, peer.UndoPath, peer.EndedPath, peer.RefusalPath} {
		for who, at := range map[string]struct {
			cfg   *rest.Config
			plane *planes.Plane
		}{"system:masters at the root": {srv.Config, nil}, "system:masters through a plane": {srv.Config, &plane}, "a project member through its plane": {member, &plane}} {
			if code, resp := call(t, at.cfg, at.plane, http.MethodPost, path, body); code != http.StatusNotFound {
				t.Errorf("%s posting %s on the API: %d %.120s, want 404", who, path, code, resp)
			}
		}
	}
}
