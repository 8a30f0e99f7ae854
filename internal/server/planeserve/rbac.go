package planeserve

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// planeRBAC reads the RBAC objects of the plane a request is made to (the
// plane in its context), for the RBAC authorizer that decides the requests
// of users who may not enter the plane as its administrators. Every read
// goes through the plane's API, so a binding takes effect at once.
type planeRBAC struct{ reg *Registry }

func (r planeRBAC) kube(ctx context.Context) (kubernetes.Interface, error) {
	p, ok := planes.From(ctx)
	if !ok {
		return nil, fmt.Errorf("not a request to a control plane")
	}
	return r.reg.Kube(p)
}

func (r planeRBAC) GetRole(ctx context.Context, namespace, name string) (*rbacv1.Role, error) {
	k, err := r.kube(ctx)
	if err != nil {
		return nil, err
	}
	return k.RbacV1().Roles(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r planeRBAC) ListRoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	k, err := r.kube(ctx)
	if err != nil {
		return nil, err
	}
	list, err := k.RbacV1().RoleBindings(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*rbacv1.RoleBinding, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (r planeRBAC) GetClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	k, err := r.kube(ctx)
	if err != nil {
		return nil, err
	}
	return k.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
}

func (r planeRBAC) ListClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	k, err := r.kube(ctx)
	if err != nil {
		return nil, err
	}
	list, err := k.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*rbacv1.ClusterRoleBinding, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
