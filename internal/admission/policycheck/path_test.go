package policycheck

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPathOfAField: the compiler's field paths become field.Paths, and lead
// to the value the error shows.
func TestPathOfAField(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"trigger": map[string]any{"constraints": []any{map[string]any{"expression": "1"}}},
		"target": map[string]any{"resourceClaimTemplate": map[string]any{"metadata": map[string]any{
			"labels": map[string]any{"app.kubernetes.io/name": "{{ x"}}}},
	}}}
	for _, tc := range []struct {
		in, path string
		value    any
	}{
		{"spec.trigger.constraints[0].expression", "spec.trigger.constraints[0].expression", "1"},
		{"spec.target.resourceClaimTemplate.metadata.labels[app.kubernetes.io/name]", "spec.target.resourceClaimTemplate.metadata.labels[app.kubernetes.io/name]", "{{ x"},
		{"spec.target.resourceClaimTemplate.metadata.name", "spec.target.resourceClaimTemplate.metadata.name", nil},
		{"spec.trigger", "spec.trigger", nil},
		{"", "spec", nil},
	} {
		p, _ := parsePath(tc.in)
		if p.String() != tc.path {
			t.Errorf("parsePath(%q) = %s, want %s", tc.in, p, tc.path)
		}
		if got := valueAt(obj, tc.in); got != tc.value {
			t.Errorf("valueAt(%q) = %v, want %v", tc.in, got, tc.value)
		}
	}
}
