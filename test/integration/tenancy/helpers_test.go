package tenancy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// asUser is a client that impersonates user (with no groups but
// system:authenticated): only the roles bound to that user apply.
func asUser(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return quotatest.NewClient(t, cfg)
}

// allowCreatingOrganizations lets user create organizations, and nothing else.
func allowCreatingOrganizations(t *testing.T, admin client.Client, user string) {
	t.Helper()
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
}

func newOrganization(name string) *rmv1alpha1.Organization {
	return &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
}

func newProject(name, org string) *rmv1alpha1.Project {
	return &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}}
}

// waitReady waits until obj (an Organization or a Project) has Ready=status
// and returns the condition.
func waitReady(t *testing.T, c client.Client, obj client.Object, status metav1.ConditionStatus) metav1.Condition {
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
		return last != nil && last.Status == status, nil
	})
	if err != nil {
		t.Fatalf("%s never had Ready=%s (last: %+v)", obj.GetName(), status, last)
	}
	return *last
}

// waitGone waits until obj does not exist.
func waitGone(t *testing.T, c client.Client, obj client.Object, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("%T %s still exists %s later (finalizers %v)", obj, client.ObjectKeyFromObject(obj), timeout, obj.GetFinalizers())
	}
}

// ownerBinding is the RoleBinding the controller makes in org's namespace.
func ownerBinding(org string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rmv1alpha1.OrganizationOwnerBinding, Namespace: rmv1alpha1.OrganizationNamespace(org)}}
}

func namespaceOf(org string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rmv1alpha1.OrganizationNamespace(org)}}
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got none", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err.Error(), p)
		}
	}
}

var seq int

// uniq makes a short name unique to this run (organization names are at most 50 characters).
func uniq(prefix string) string {
	seq++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, seq)
}

// decided waits until the claim is decided and returns its Granted condition.
func decided(t *testing.T, c client.Client, claim *quotav1alpha1.ResourceClaim) metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
			return false, nil
		}
		got = quotav1alpha1.ClaimDecision(claim.Status.Conditions)
		return got != nil, nil

	})
	if err != nil {
		t.Fatalf("claim %s/%s was not decided within 30s", claim.Namespace, claim.Name)
	}
	return *got
}
