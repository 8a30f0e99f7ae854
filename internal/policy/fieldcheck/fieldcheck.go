package fieldcheck

import (
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// UnknownField returns an error naming the first field of `trigger` the
// checked expression reads that none of the schemas declares, or nil.
//
// Only closed schemas are judged: where a schema preserves unknown fields,
// has no type (a quantity, an embedded object), or is a map, any name is
// accepted, as the API server would store it. A field declared in some
// served version and not others is accepted (has() is the way to read it).
func UnknownField(ast *cel.Ast, kind string, schemas []*spec.Schema) error {
	if len(schemas) == 0 {
		return nil
	}
	var found error
	celast.PreOrderVisit(celast.NavigateAST(ast.NativeRep()), celast.NewExprVisitor(func(e celast.Expr) {
		if found != nil || e.Kind() != celast.SelectKind {
			return
		}
		path, ok := triggerPath(e)
		if !ok {
			return
		}
		for i := range path {
			if i == 0 && path[0] == "[]" {
				return
			}
			if path[i] == "[]" {
				continue
			}
			var known []string
			missing := true
			for _, s := range schemas {
				names, ok := declares(s, path[:i], path[i])
				if ok {
					missing = false
					break
				}
				known = append(known, names...)
			}
			if missing {
				found = unknownFieldError(kind, path[:i+1], known)
				return
			}
		}
	}))
	return found
}

func unknownFieldError(kind string, path, known []string) error {
	where := "trigger" + joinPath(path[:len(path)-1])
	name := path[len(path)-1]
	known = dedupe(known)
	msg := fmt.Sprintf("reads trigger%s, a field %s does not have in any version it serves", joinPath(path), kind)
	if len(known) > 0 {
		msg += fmt.Sprintf("; %s has %s", where, strings.Join(known, ", "))
		if near := quota.Nearest(name, known); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
	}
	return fmt.Errorf("%s; correct the field name, or remove the expression", msg)
}

func joinPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if p == "[]" {
			b.WriteString("[*]")
			continue
		}
		b.WriteString(".")
		b.WriteString(p)
	}
	return b.String()
}

// dedupe returns the distinct strings of s, sorted, leaving s as it was.
func dedupe(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// triggerPath is the chain of field names (and "[]" for an index) from
// `trigger` to the select e; ok is false when e does not start at trigger.
func triggerPath(e celast.Expr) ([]string, bool) {
	switch e.Kind() {
	case celast.IdentKind:
		return nil, e.AsIdent() == "trigger"
	case celast.SelectKind:
		s := e.AsSelect()
		p, ok := triggerPath(s.Operand())
		return append(p, s.FieldName()), ok
	case celast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || len(c.Args()) != 2 {
			return nil, false
		}
		p, ok := triggerPath(c.Args()[0])
		if !ok {
			return nil, false
		}
		// trigger.metadata['labels'] reads a field by name.
		if k := c.Args()[1]; k.Kind() == celast.LiteralKind {
			if s, isStr := k.AsLiteral().(types.String); isStr {
				return append(p, "[]", string(s)), true
			}
		}
		return append(p, "[]"), true
	}
	return nil, false
}

// declares reports whether the schema s, followed along path, declares
// name (or accepts any name there); when it does not, it returns the names
// it declares there.
func declares(s *spec.Schema, path []string, name string) ([]string, bool) {
	for i := 0; i < len(path); i++ {
		p := path[i]
		if open(s) {
			return nil, true
		}
		if p == "[]" {
			switch {
			case s.Items != nil && s.Items.Schema != nil:
				s = s.Items.Schema
			case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
				s = s.AdditionalProperties.Schema
			case i+1 < len(path):
				// obj['field']: the next element is the field's name.
				i++
				next, ok := property(s, path[i])
				if !ok {
					return nil, true
				}
				s = next
			default:
				return nil, true
			}
			continue
		}
		next, ok := property(s, p)
		if !ok {
			// An earlier element is reported on its own.
			return nil, true
		}
		s = next
	}
	if open(s) {
		return nil, true
	}
	if _, ok := property(s, name); ok {
		return nil, true
	}
	if len(path) == 0 && (name == "apiVersion" || name == "kind" || name == "metadata") {
		return nil, true
	}
	return names(s), false
}

// open: the schema accepts fields it does not declare, or declares none.
func open(s *spec.Schema) bool {
	if s == nil {
		return true
	}
	if v, ok := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields"); ok && v {
		return true
	}
	if s.AdditionalProperties != nil && (s.AdditionalProperties.Allows || s.AdditionalProperties.Schema != nil) {
		return true
	}
	if s.Items != nil && s.Items.Schema != nil {
		return false
	}
	return len(s.Properties) == 0 && !hasBranchProperties(s)
}

func hasBranchProperties(s *spec.Schema) bool {
	for i := range s.AllOf {
		if len(s.AllOf[i].Properties) > 0 {
			return true
		}
	}
	return false
}

// property is the schema of one declared field, looking into allOf, as
// resolved references appear.
func property(s *spec.Schema, name string) (*spec.Schema, bool) {
	if p, ok := s.Properties[name]; ok {
		return &p, true
	}
	for i := range s.AllOf {
		if open(&s.AllOf[i]) {
			return nil, false
		}
		if p, ok := property(&s.AllOf[i], name); ok {
			return p, true
		}
	}
	return nil, false
}

func names(s *spec.Schema) []string {
	var out []string
	for n := range s.Properties {
		out = append(out, n)
	}
	for i := range s.AllOf {
		out = append(out, names(&s.AllOf[i])...)
	}
	return out
}
