package kinds

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCRDName: a CRD is named <plural>.<group>, and the group is read back
// from the name.
func TestCRDName(t *testing.T) {
	cases := map[string]struct {
		gr        schema.GroupResource
		want      string
		wantGroup string
	}{
		"a custom group":    {gr: schema.GroupResource{Group: "adv.example.com", Resource: "widgets"}, want: "widgets.adv.example.com", wantGroup: "adv.example.com"},
		"the quota group":   {gr: schema.GroupResource{Group: "quota.miloapis.com", Resource: "resourceclaims"}, want: "resourceclaims.quota.miloapis.com", wantGroup: "quota.miloapis.com"},
		"a one-label group": {gr: schema.GroupResource{Group: "local", Resource: "gadgets"}, want: "gadgets.local", wantGroup: "local"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := CRDName(tc.gr)
			if got != tc.want {
				t.Errorf("CRDName(%v) = %q, want %q", tc.gr, got, tc.want)
			}
			if group, ok := CRDGroup(got); !ok || group != tc.wantGroup {
				t.Errorf("CRDGroup(%q) = %q, %v; want %q", got, group, ok, tc.wantGroup)
			}
		})
	}
	for _, name := range []string{"widgets", "widgets.", ""} {
		if group, ok := CRDGroup(name); ok {
			t.Errorf("CRDGroup(%q) = %q, true; want false: not <plural>.<group>", name, group)
		}
	}
}

// TestScaleReplicasPath: the replica count is where the CRD's version says
// its scale keeps it, and at spec.replicas otherwise.
func TestScaleReplicasPath(t *testing.T) {
	scaled := func(name, path string) map[string]any {
		return map[string]any{"name": name, "served": true,
			"subresources": map[string]any{"scale": map[string]any{"specReplicasPath": path, "statusReplicasPath": ".status.replicas"}}}
	}
	cases := map[string]struct {
		crd     *unstructured.Unstructured
		version string
		want    []string
	}{
		"no CRD: a built-in kind or an aggregated API": {version: "v1", want: []string{"spec", "replicas"}},
		"the version's path":                           {crd: crd(scaled("v1", ".spec.size")), version: "v1", want: []string{"spec", "size"}},
		"a nested path":                                {crd: crd(scaled("v1", ".spec.workers.count")), version: "v1", want: []string{"spec", "workers", "count"}},
		"the version asked, not another's":             {crd: crd(scaled("v1", ".spec.size"), scaled("v2", ".spec.scale.replicas")), version: "v2", want: []string{"spec", "scale", "replicas"}},
		"a version without a scale":                    {crd: crd(version("v1", true, true), scaled("v2", ".spec.size")), version: "v1", want: []string{"spec", "replicas"}},
		"a version the CRD does not have":              {crd: crd(scaled("v1", ".spec.size")), version: "v9", want: []string{"spec", "replicas"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ScaleReplicasPath(tc.crd, tc.version)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
