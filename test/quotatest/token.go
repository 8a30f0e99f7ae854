package quotatest

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// ServiceAccountToken makes the service account ns/name (if missing),
// binds it to the ClusterRole role — cluster-wide with a ClusterRoleBinding
// when bindIn is "", else with a RoleBinding in bindIn — and returns an
// hour-long token of it with its user name, once RBAC's cache has the
// binding (WaitBound).
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
	user, groups := ServiceAccountUser(ns, name)
	WaitBound(t, kube, user, groups, role, bindIn)
	tok, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token, user
}

// TokenConfig is cfg's server and CA, authenticated by token alone: the
// client as a service account holding it would be.
func TokenConfig(cfg *rest.Config, token string) *rest.Config {
	out := rest.AnonymousClientConfig(cfg)
	out.BearerToken = token
	return out
}
