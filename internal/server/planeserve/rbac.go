package planeserve

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
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

// binds reports whether any of the plane's RoleBindings (in any of its
// namespaces) or ClusterRoleBindings names u as a subject.
func (r planeRBAC) binds(ctx context.Context, u user.Info) (bool, error) {
	if u == nil {
		return false, nil
	}
	k, err := r.kube(ctx)
	if err != nil {
		return false, err
	}
	crbs, err := k.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, b := range crbs.Items {
		if names(b.Subjects, "", u) {
			return true, nil
		}
	}
	rbs, err := k.RbacV1().RoleBindings(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, b := range rbs.Items {
		if names(b.Subjects, b.Namespace, u) {
			return true, nil
		}
	}
	return false, nil
}

// names reports whether subjects of a binding in namespace ns ("" for a
// ClusterRoleBinding) name u, as RBAC matches them.
func names(subjects []rbacv1.Subject, ns string, u user.Info) bool {
	for _, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if s.Name == u.GetName() {
				return true
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.GetGroups(), s.Name) {
				return true
			}
		case rbacv1.ServiceAccountKind:
			saNS := s.Namespace
			if saNS == "" {
				saNS = ns
			}
			if saNS != "" && serviceaccount.MakeUsername(saNS, s.Name) == u.GetName() {
				return true
			}
		}
	}
	return false
}
