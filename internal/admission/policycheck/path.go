package policycheck

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// parsePath turns a field path as the compiler writes it
// ("spec.target.resourceClaimTemplate.metadata.labels[app]",
// "spec.trigger.constraints[0].expression") into a field.Path and the steps
// to walk an object along it.
func parsePath(s string) (*field.Path, []any) {
	var p *field.Path
	var steps []any
	child := func(name string) {
		if name == "" {
			return
		}
		steps = append(steps, name)
		if p == nil {
			p = field.NewPath(name)
		} else {
			p = p.Child(name)
		}
	}
	for len(s) > 0 {
		i := strings.IndexAny(s, ".[")
		if i < 0 {
			child(s)
			break
		}
		child(s[:i])
		if s[i] == '.' {
			s = s[i+1:]
			continue
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			child(s[i:])
			break
		}
		inner := s[i+1 : i+j]
		if p == nil {
			p = field.NewPath("")
		}
		if n, err := strconv.Atoi(inner); err == nil {
			steps = append(steps, n)
			p = p.Index(n)
		} else {
			steps = append(steps, inner)
			p = p.Key(inner)
		}
		s = strings.TrimPrefix(s[i+j+1:], ".")
	}
	if p == nil {
		p = field.NewPath("spec")
	}
	return p, steps
}

// valueAt is the value at path in obj, for the error's "Invalid value";
// nil when the path does not lead to one.
func valueAt(obj *unstructured.Unstructured, path string) any {
	_, steps := parsePath(path)
	var cur any = obj.Object
	for _, st := range steps {
		switch k := st.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	switch cur.(type) {
	case map[string]any, []any:
		return nil
	}
	return cur
}
