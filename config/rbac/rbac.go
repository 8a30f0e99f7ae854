package rbac

import (
	"bytes"
	_ "embed"
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

//go:embed roles.yaml
var rolesYAML []byte

// YAML returns the roles as one multi-document YAML stream.
func YAML() []byte { return bytes.Clone(rolesYAML) }

// ClusterRoles returns the shipped roles.
func ClusterRoles() ([]*rbacv1.ClusterRole, error) {
	var out []*rbacv1.ClusterRole
	for i, doc := range strings.Split(string(rolesYAML), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), r); err != nil {
			return nil, fmt.Errorf("decoding role %d of config/rbac/roles.yaml: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}
