package planes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/server/planeserve"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// tokenFor is a client configuration authenticated by a real token of a
// service account in namespace ns, bound as the test binds it.
func tokenFor(t *testing.T, ns, name string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tok, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	must(t, err, "token of %s/%s", ns, name)
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = tok.Status.Token
	return cfg
}

// bind binds service account subject to ClusterRole role in namespace ns
// (RoleBinding name), once RBAC's cache at the root has the binding.
func bind(t *testing.T, ns, name, role string, subject rbacv1.Subject) {
	t.Helper()
	admin := quotatest.NewClient(t, srv.Config)
	must(t, admin.Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Subjects: []rbacv1.Subject{subject}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}), "binding %s", role)
	user, groups := quotatest.ServiceAccountUser(subject.Namespace, subject.Name)
	quotatest.WaitBound(t, kubernetes.NewForConfigOrDie(srv.Config), user, groups, role, ns)
}

// canUse reports whether cfg may list namespaces in plane p.
func canUse(ctx context.Context, cfg *rest.Config, p planes.Plane) error {
	_, err := kubernetes.NewForConfigOrDie(planeConfig(cfg, p)).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	return err
}

// An organization's owner (a service account with a real token, bound to
// the shipped owner role in the organization's namespace) uses the
// organization's plane and its projects' planes, never another
// organization's; a project member (bound to the shipped member role in the
// project's namespace) uses that project's plane only.
func TestWhoMayEnterAPlane(t *testing.T) {
	ctx := context.Background()
	a := newTenant(t, "acc-a", "acc-a-owner")
	b := newTenant(t, "acc-b", "acc-b-owner")
	a.project(t, "acc-a-web")
	a.project(t, "acc-a-db")
	b.project(t, "acc-b-web")

	owner := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "organization-acc-a", Name: "ops"}
	bind(t, "organization-acc-a", "ops-owner", rmv1alpha1.OrganizationOwnerRole, owner)
	ownerCfg := tokenFor(t, "organization-acc-a", "ops")
	eventually(t, 10e9, "the owner bound", func(ctx context.Context) error { return canUse(ctx, ownerCfg, orgPlane("acc-a")) })
	for _, p := range []planes.Plane{orgPlane("acc-a"), projectPlane("acc-a-web"), projectPlane("acc-a-db")} {
		if err := canUse(ctx, ownerCfg, p); err != nil {
			t.Errorf("the owner of acc-a may not use %s: %v", p, err)
		}
	}
	for _, p := range []planes.Plane{orgPlane("acc-b"), projectPlane("acc-b-web")} {
		err := canUse(ctx, ownerCfg, p)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not use the control plane") {
			t.Errorf("the owner of acc-a uses %s of another organization: %v", p, err)
		}
	}

	member := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "organization-acc-a", Name: "dev"}
	bind(t, planes.ProjectNamespace("acc-a-web"), "dev-member", planeserve.MemberRole, member)
	devCfg := tokenFor(t, "organization-acc-a", "dev")
	eventually(t, 10e9, "the member bound", func(ctx context.Context) error { return canUse(ctx, devCfg, projectPlane("acc-a-web")) })
	for _, p := range []planes.Plane{projectPlane("acc-a-db"), orgPlane("acc-a"), projectPlane("acc-b-web")} {
		if err := canUse(ctx, devCfg, p); !apierrors.IsForbidden(err) {
			t.Errorf("a member of acc-a-web uses %s: %v", p, err)
		}
	}
	// Anyone else is decided by the plane's own RBAC objects: the owner
	// lets a guest read ConfigMaps in one namespace of one plane.
	// rbac: no wait for the guest's binding: a plane's RBAC reads its bindings through the plane's API, no cache (planeserve.planeRBAC).
	guestCfg := tokenFor(t, "organization-acc-a", "guest")
	web := kubernetes.NewForConfigOrDie(planeConfig(ownerCfg, projectPlane("acc-a-web")))
	_, err := web.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-config"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	must(t, err, "the owner creating a Role in the plane")
	_, err = web.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guest"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "organization-acc-a", Name: "guest"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-config"}}, metav1.CreateOptions{})
	must(t, err, "the owner binding the guest in the plane")
	guest := kubernetes.NewForConfigOrDie(planeConfig(guestCfg, projectPlane("acc-a-web")))
	if _, err := guest.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("a guest bound by the plane's RBAC may not list ConfigMaps there: %v", err)
	}
	if _, err := guest.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the guest lists Secrets its binding does not allow: %v", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(planeConfig(guestCfg, projectPlane("acc-a-db"))).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a binding in one plane lets the guest into another: %v", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(guestCfg).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a binding in a plane lets the guest read the root: %v", err)
	}

	// Inside a plane, its user may not change the platform's kinds or give
	// itself quota.
	dyn := quotatest.NewClient(t, planeConfig(ownerCfg, projectPlane("acc-a-web")))
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "selfie", Namespace: planes.SystemNamespace}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "acc-a-web"},
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: "acc.example.com/x", Buckets: []quotav1alpha1.GrantBucket{{Amount: 1000}}}}}}
	if err := dyn.Create(ctx, g); !apierrors.IsForbidden(err) {
		t.Errorf("the owner wrote a ResourceGrant in a project's plane: %v", err)
	}
	// A plane that does not exist, or one of no Ready owner.
	if err := canUse(ctx, srv.Config, projectPlane("acc-none")); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a plane of no project: want NotFound saying so, got %v", err)
	}
}

// A Project created in its organization's plane gets its owner, label and
// ownerReference from the path; the organization's plane lists only its
// projects; another organization named in spec.ownerRef is refused.
func TestProjectsThroughTheirOrganizationsPlane(t *testing.T) {
	ctx := context.Background()
	a := newTenant(t, "via-a", "via-a-owner")
	b := newTenant(t, "via-b", "via-b-owner")
	b.project(t, "via-b-web")
	cl := quotatest.NewClient(t, planeConfig(impersonating(srv.Config, a.owner), orgPlane("via-a")))
	p := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: "via-a-web"}}
	must(t, cl.Create(ctx, p), "creating a project without spec.ownerRef in the organization's plane")
	root := quotatest.NewClient(t, srv.Config)
	got := &rmv1alpha1.Project{}
	must(t, root.Get(ctx, client.ObjectKey{Name: "via-a-web"}, got), "reading the project at the root")
	if got.Spec.OwnerRef.Name != "via-a" || got.Spec.OwnerRef.Kind != rmv1alpha1.ProjectOwnerKindOrganization {
		t.Errorf("spec.ownerRef %+v, want Organization via-a", got.Spec.OwnerRef)
	}
	if got.Labels[rmv1alpha1.OrganizationNameLabel] != "via-a" {
		t.Errorf("label %s=%q, want via-a", rmv1alpha1.OrganizationNameLabel, got.Labels[rmv1alpha1.OrganizationNameLabel])
	}
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != a.org.UID {
		t.Errorf("ownerReferences %+v, want the organization via-a (%s)", got.OwnerReferences, a.org.UID)
	}
	waitReady(t, root, got)
	list := &rmv1alpha1.ProjectList{}
	must(t, cl.List(ctx, list), "listing projects in the organization's plane")
	if len(list.Items) != 1 || list.Items[0].Name != "via-a-web" {
		var names []string
		for _, i := range list.Items {
			names = append(names, i.Name)
		}
		t.Errorf("the organization's plane lists %v, want [via-a-web]", names)
	}
	if err := cl.Get(ctx, client.ObjectKey{Name: "via-b-web"}, &rmv1alpha1.Project{}); !apierrors.IsNotFound(err) {
		t.Errorf("another organization's project read through this plane: %v", err)
	}
	other := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: "via-a-x"},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: "via-b"}}}
	if err := cl.Create(ctx, other); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "belongs to it") {
		t.Errorf("a project naming another organization in spec.ownerRef: want Invalid, got %v", err)
	}
}

// kubectl through a plane's URL: discovery, get, apply (server-side and
// dry-run) and explain work as against any cluster.
func TestKubectlThroughAPlane(t *testing.T) {
	kubectl := tools.Require(t, tools.Kubectl)
	tn := newTenant(t, "kctl", "kctl-owner")
	tn.project(t, "kctl-web")
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	out, err := exec.Command(quotatest.BuildBinary(t), "kubeconfig", "--data-dir", srv.DataDir, "--project", "kctl-web").Output()
	must(t, err, "quotaplane kubeconfig --project")
	// A project that does not exist: refused (exit 1), saying so, and
	// printing no kubeconfig.
	var stdout, stderr strings.Builder
	missing := exec.Command(quotatest.BuildBinary(t), "kubeconfig", "--data-dir", srv.DataDir, "--project", "kctl-nosuch")
	missing.Stdout, missing.Stderr = &stdout, &stderr
	if err := missing.Run(); err == nil || stdout.Len() != 0 || !strings.Contains(stderr.String(), `there is no project "kctl-nosuch"`) {
		t.Errorf("quotaplane kubeconfig --project kctl-nosuch: %v, stdout %q, stderr %q; want exit 1 naming the missing project and no kubeconfig", err, stdout.String(), stderr.String())
	}
	must(t, os.WriteFile(kc, out, 0o600), "writing the kubeconfig")
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kc}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	if got := run("", "api-resources"); !strings.Contains(got, "configmaps") || !strings.Contains(got, "resourceclaims") {
		t.Errorf("kubectl api-resources in a plane lacks built-in or platform kinds:\n%s", got)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: via-kubectl\n  namespace: default\ndata:\n  a: b\n"
	run(cm, "apply", "--server-side", "--dry-run=server", "-f", "-")
	if got, _ := exec.Command(kubectl, "--kubeconfig", kc, "get", "configmap", "via-kubectl", "-n", "default").CombinedOutput(); !strings.Contains(string(got), "NotFound") {
		t.Errorf("a dry-run apply stored the ConfigMap: %s", got)
	}
	run(cm, "apply", "--server-side", "-f", "-")
	if got := run("", "get", "configmaps", "-n", "default", "-o", "name"); !strings.Contains(got, "configmap/via-kubectl") {
		t.Errorf("kubectl get in the plane: %s", got)
	}
	if got := run("", "explain", "configmap.data"); !strings.Contains(got, "data") {
		t.Errorf("kubectl explain in the plane: %s", got)
	}
	if got := run("", "get", "namespaces", "-o", "name"); !strings.Contains(got, "namespace/"+planes.SystemNamespace) {
		t.Errorf("the plane has no %s namespace: %s", planes.SystemNamespace, got)
	}
	root := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := root.CoreV1().ConfigMaps("default").Get(context.Background(), "via-kubectl", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the plane's ConfigMap is visible at the root: %v", err)
	}
}
