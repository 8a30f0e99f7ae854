package planes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// impersonating is srv's admin configuration acting as user.
func impersonating(cfg *rest.Config, user string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}

// planeConfig is cfg aimed at plane p.
func planeConfig(cfg *rest.Config, p planes.Plane) *rest.Config { return planes.ConfigFor(cfg, p) }

func projectPlane(name string) planes.Plane { return planes.Plane{Kind: planes.Projects, Name: name} }
func orgPlane(name string) planes.Plane     { return planes.Plane{Kind: planes.Organizations, Name: name} }

// tenant is an organization created by its owner, with projects.
type tenant struct {
	owner string
	org   *rmv1alpha1.Organization
}

// newTenant creates organization org as user owner (allowed to create
// organizations for the test) and waits until it is Ready.
func newTenant(t *testing.T, org, owner string) *tenant {
	t.Helper()
	admin := quotatest.NewClient(t, srv.Config)
	allowCreatingOrganizations(t, admin, owner)
	c := quotatest.NewClient(t, impersonating(srv.Config, owner))
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	waitReady(t, admin, o)
	return &tenant{owner: owner, org: o}
}

// project creates a project of the tenant's organization at the root, as
// its owner, and waits until it is Ready.
func (tn *tenant) project(t *testing.T, name string) *rmv1alpha1.Project {
	t.Helper()
	c := quotatest.NewClient(t, impersonating(srv.Config, tn.owner))
	p := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: tn.org.Name}}}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, quotatest.NewClient(t, srv.Config), p)
	return p
}

var allowed = map[string]bool{}

func allowCreatingOrganizations(t *testing.T, admin client.Client, user string) {
	t.Helper()
	if allowed[user] {
		return
	}
	ctx := context.Background()
	name := "test-create-organizations-" + strings.ReplaceAll(user, ":", "-")
	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"organizations"}, Verbs: []string{"create"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// RBAC authorizes from a cache: act as user once it has the binding.
	quotatest.WaitAllowed(t, []kubernetes.Interface{kubernetes.NewForConfigOrDie(srv.Config)}, user, nil,
		&authorizationv1.ResourceAttributes{Verb: "create", Group: rmv1alpha1.GroupName, Resource: "organizations"})
	allowed[user] = true
}

// waitReady waits until obj (an Organization or a Project) is Ready.
func waitReady(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *rmv1alpha1.Organization:
			conds = o.Status.Conditions
		case *rmv1alpha1.Project:
			conds = o.Status.Conditions
		}
		last = meta.FindStatusCondition(conds, rmv1alpha1.ConditionReady)
		return last != nil && last.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("%s never became Ready (last: %+v)", obj.GetName(), last)
	}
}

// eventually polls check until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s: %v", what, timeout, last)
	}
}

func must(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// newPlaneClient is an admin client of plane p.
func newPlaneClient(t *testing.T, p planes.Plane) client.Client {
	return quotatest.NewClient(t, planeConfig(srv.Config, p))
}

// createReview is a member cluster's AdmissionReview of the create of obj
// (its apiVersion and kind set) in resource, asked by the cluster's user.
func createReview(t *testing.T, obj runtime.Object, resource, user string) []byte {
	t.Helper()
	m, err := meta.Accessor(obj)
	must(t, err, "reading the object's metadata")
	raw, err := json.Marshal(obj)
	must(t, err, "encoding the object")
	gvk := obj.GetObjectKind().GroupVersionKind()
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("uid-" + m.GetName()), Operation: admissionv1.Create, Namespace: m.GetNamespace(), Name: m.GetName(),
			Kind:     metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Resource: metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource},
			UserInfo: authenticationv1.UserInfo{Username: user, Groups: []string{"system:authenticated"}},
			Object:   runtime.RawExtension{Raw: raw}}})
	must(t, err, "encoding the review")
	return b
}
