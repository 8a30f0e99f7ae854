package setup

import (
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/quotaplane/quotaplane/internal/members"
)

// The shipped ClusterRoles a member's webhook is bound to in the quota plane
// (config/rbac/roles.yaml).
const (
	// webhookRole: reading the policies and claims, deleting claims,
	// creating namespaces, posting to the review paths; cluster-wide.
	webhookRole = "quotaplane-member-webhook"
	// clusterRole: verbs review and release on one member cluster, bound in
	// its namespace in the quota plane.
	clusterRole = "quotaplane-member-cluster"
)

// TokenRoleName is the Role letting cluster's webhook service account mint
// its own tokens, and its RoleBinding.
func TokenRoleName(cluster string) string { return "quotaplane-member-" + cluster + "-token" }

// RBACOptions name the webhook's identity in the quota plane.
type RBACOptions struct {
	// ServiceAccount is namespace/name of a service account of the quota
	// plane; User a user name there. One of the two.
	ServiceAccount, User string
}

// PrintRBAC writes what the quota plane needs before cluster's webhook
// may speak for it: the cluster's namespace, a ClusterRoleBinding of
// quotaplane-member-webhook and a RoleBinding of quotaplane-member-cluster
// in the cluster's namespace, both for the webhook's identity. Applied to
// the quota plane, they tie that identity to this one cluster. For a
// service account it adds a Role and RoleBinding in the account's
// namespace letting it mint its own tokens (create on serviceaccounts/token
// for its name only): the webhook refreshes its credential with it.
func PrintRBAC(cluster string, r RBACOptions, out io.Writer) error {
	if err := members.ValidateName(cluster); err != nil {
		return fmt.Errorf("--cluster-name: %w", err)
	}
	var subject rbacv1.Subject
	var saNS, saName string
	switch {
	case (r.ServiceAccount == "") == (r.User == ""):
		return errors.New("give the webhook's identity in the quota plane: --service-account <namespace>/<name> or --user <name>, one of the two")
	case r.User != "":
		subject = rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: r.User}
	default:
		var ok bool
		saNS, saName, ok = strings.Cut(r.ServiceAccount, "/")
		if !ok || saNS == "" || saName == "" || strings.Contains(saName, "/") {
			return fmt.Errorf("--service-account %q: give it as <namespace>/<name>, the service account of the quota plane the webhook's kubeconfig uses", r.ServiceAccount)
		}
		subject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: saName}
	}
	ns := members.Namespace(cluster)
	name := "quotaplane-member-" + cluster
	labels := map[string]string{members.Label: cluster}
	objs := []runtime.Object{
		&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: webhookRole}, Subjects: []rbacv1.Subject{subject}},
		&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}, Subjects: []rbacv1.Subject{subject}},
	}
	if saName != "" {
		token := TokenRoleName(cluster)
		objs = append(objs,
			&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
				ObjectMeta: metav1.ObjectMeta{Name: token, Namespace: saNS, Labels: labels},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{saName}}}},
			&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Name: token, Namespace: saNS, Labels: labels},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: token}, Subjects: []rbacv1.Subject{subject}})
	}
	fmt.Fprintf(out, "# Apply to the quota plane: the identity below speaks for member cluster %s only\n# (verbs review and release on clusters.quota.miloapis.com %s; docs/clusters.md).\n", cluster, cluster)
	fmt.Fprintf(out, "# The quota plane takes every user and group name of %s as %s:<name>; to take them as its own\n# (one identity provider for both), start serve with --trust-member-cluster-identities=%s.\n", cluster, cluster, cluster)
	if saName != "" {
		fmt.Fprintf(out, "# The Role %s lets the service account mint its own successor tokens: the webhook refreshes\n"+
			"# its credential with it. Whoever holds a valid token can do the same, until the binding or the\n"+
			"# service account is deleted (deleting the service account invalidates every token it has).\n", TokenRoleName(cluster))
	}
	return writeYAML(out, objs)
}

// writeYAML writes objs as one YAML stream, "---" between documents.
func writeYAML(out io.Writer, objs []runtime.Object) error {
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(out, "---")
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
	}
	return nil
}
