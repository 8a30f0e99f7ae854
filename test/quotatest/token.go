package quotatest

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceAccountToken makes the service account ns/name (if missing),
// binds it to the ClusterRole role — cluster-wide with a ClusterRoleBinding
// when bindIn is "", else with a RoleBinding in bindIn — and returns an
// hour-long token of it with its user name.
func ServiceAccountToken(t testing.TB, cfg *rest.Config, ns, name, role, bindIn string) (token, user string) {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cfg)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	var err error
	if bindIn == "" {
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-" + role}, Subjects: subjects, RoleRef: ref}, metav1.CreateOptions{})
	} else {
		_, err = kube.RbacV1().RoleBindings(bindIn).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-" + role}, Subjects: subjects, RoleRef: ref}, metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	user = "system:serviceaccount:" + ns + ":" + name
	WaitBound(t, kube, user, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}, role, bindIn)
	tok, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token, user
}

// WaitBound waits until RBAC's cache lets user (in groups) do what the
// first rule of ClusterRole role allows — cluster-wide, or in namespace
// bindIn — after a binding to it was created: RBAC authorizes from a cache,
// and a request made at once may be refused for a moment.
func WaitBound(t testing.TB, kube kubernetes.Interface, user string, groups []string, role, bindIn string) {
	t.Helper()
	ctx := context.Background()
	cr, err := kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return // bound before the role exists: its creator waits for it
	}
	if err != nil {
		t.Fatalf("reading ClusterRole %s: %v", role, err)
	}
	var attrs *authorizationv1.ResourceAttributes
	for _, r := range cr.Rules {
		if len(r.Verbs) > 0 && len(r.Resources) > 0 && len(r.APIGroups) > 0 && r.Verbs[0] != "*" && r.Resources[0] != "*" {
			attrs = &authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0], Namespace: bindIn}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			break
		}
	}
	if attrs == nil {
		return // nothing concrete to ask about
	}
	groups = append(groups, "system:authenticated")
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: attrs}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
	}); err != nil {
		t.Fatalf("RBAC does not allow %s %+v 30 s after binding it to ClusterRole %s", user, attrs, role)
	}
}

// TokenConfig is cfg's server and CA, authenticated by token alone: the
// client as a service account holding it would be.
func TokenConfig(cfg *rest.Config, token string) *rest.Config {
	out := rest.AnonymousClientConfig(cfg)
	out.BearerToken = token
	return out
}
