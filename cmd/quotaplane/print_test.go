package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestPrintCommands: `quotaplane crds` and `quotaplane rbac` print every
// object another cluster needs, as YAML kubectl applies.
func TestPrintCommands(t *testing.T) {
	for _, tc := range []struct {
		command, kind string
		want          []string
	}{
		{"crds", "CustomResourceDefinition", []string{"resourceclaims.quota.miloapis.com", "grantcreationpolicies.quota.miloapis.com",
			"organizations.resourcemanager.miloapis.com", "projects.resourcemanager.miloapis.com"}},
		{"rbac", "ClusterRole", []string{"quotaplane-quota-viewer", "quotaplane-quota-admin", "quotaplane-organization-owner", "quotaplane-platform-admin"}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			root := newRootCommand()
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs([]string{tc.command})
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			var names []string
			dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out.String()), 4096)
			for {
				u := &unstructured.Unstructured{}
				if err := dec.Decode(&u.Object); err != nil {
					break
				}
				if u.Object == nil {
					continue
				}
				if u.GetKind() != tc.kind {
					t.Fatalf("quotaplane %s printed a %s", tc.command, u.GetKind())
				}
				names = append(names, u.GetName())
			}
			for _, w := range tc.want {
				if !slices.Contains(names, w) {
					t.Errorf("quotaplane %s does not print %s; it prints %v", tc.command, w, names)
				}
			}
		})
	}
}
