package policy

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// template is text with {{ CEL }} segments.
type template struct {
	literal []string      // len(exprs)+1 pieces of text
	exprs   []cel.Program // between them
	source  string
	// field is the path of the policy field the template is, which an
	// evaluation error names (EvalError).
	field string
	// anyResult: a segment may yield any value (an amount's number); else
	// each must yield a string, as in the reference implementation.
	anyResult bool
}

// segment is a piece of a template: literal text, or a CEL expression.
type segment struct {
	text string
	expr bool
}

// splitTemplate splits s into literal text and {{ CEL }} expressions with
// the reference implementation's grammar: "{{" opens an expression and the
// first "}}" outside a quoted string closes it (so {{ "a}}b" }} is one
// expression); a run of three or more "{" is literal text ({{{x}}} is
// literal), as is a "}}" outside an expression; an empty or whitespace-only
// expression is dropped; an expression or a string in it that is not
// closed is an error.
func splitTemplate(s string) ([]segment, error) {
	var out []segment
	var lit strings.Builder
	for i := 0; i < len(s); {
		if !strings.HasPrefix(s[i:], "{{") {
			lit.WriteByte(s[i])
			i++
			continue
		}
		n := 0
		for i+n < len(s) && s[i+n] == '{' {
			n++
		}
		if n >= 3 {
			lit.WriteString(s[i : i+n])
			i += n
			continue
		}
		j, quote, quoteAt := i+2, byte(0), 0
		for ; j < len(s); j++ {
			c := s[j]
			if quote != 0 {
				switch c {
				case '\\':
					j++
				case quote:
					quote = 0
				}
				continue
			}
			if c == '"' || c == '\'' {
				quote, quoteAt = c, j
				continue
			}
			if strings.HasPrefix(s[j:], "}}") {
				break
			}
		}
		if j >= len(s) {
			if quote != 0 {
				return nil, fmt.Errorf("the string opened with %c at offset %d inside {{ }} is not closed", quote, quoteAt)
			}
			return nil, fmt.Errorf(`"{{" at offset %d is not closed with "}}"`, i)
		}
		if expr := strings.TrimSpace(s[i+2 : j]); expr != "" {
			if lit.Len() > 0 {
				out = append(out, segment{text: lit.String()})
				lit.Reset()
			}
			out = append(out, segment{text: expr, expr: true})
		}
		i = j + 2
	}
	if lit.Len() > 0 || len(out) == 0 {
		out = append(out, segment{text: lit.String()})
	}
	return out, nil
}

// template parses text with {{ CEL }} segments whose values are strings; a
// segment may start with a dot ({{ .trigger.x }} is {{ trigger.x }}). The
// error names field.
func (c *compiler) template(field, s string) (*template, error) {
	return c.compileTemplate(field, s, false)
}

// amountTemplate is template for an amount, whose segments may yield
// numbers.
func (c *compiler) amountTemplate(field, s string) (*template, error) {
	return c.compileTemplate(field, s, true)
}

func (c *compiler) compileTemplate(field, s string, anyResult bool) (*template, error) {
	t := &template{source: s, field: field, anyResult: anyResult}
	segs, err := splitTemplate(s)
	if err != nil {
		return nil, invalid(CauseTemplateInvalid, field, err)
	}
	var lit strings.Builder
	for _, sg := range segs {
		if !sg.expr {
			lit.WriteString(sg.text)
			continue
		}
		expr := leadingDot(sg.text)
		prg, ast, cause, err := c.expr(field, expr)
		if err != nil {
			if cause == "" {
				// The reference's words for an expression that does not compile.
				return nil, invalid(CauseTemplateInvalid, field, fmt.Errorf("CEL syntax validation failed: {{ %s }}: %w", expr, err))
			}
			return nil, invalid(cause, field, fmt.Errorf("{{ %s }}: %w", expr, err))
		}
		if out := ast.OutputType(); !anyResult && !out.IsEquivalentType(cel.StringType) && !out.IsEquivalentType(cel.DynType) {
			return nil, invalid(CauseTemplateInvalid, field, fmt.Errorf("{{ %s }} returns %s, and a template segment must return a string; convert it, for example {{ string(%s) }}", expr, out, expr))
		}
		t.literal = append(t.literal, lit.String())
		lit.Reset()
		t.exprs = append(t.exprs, prg)
	}
	t.literal = append(t.literal, lit.String())
	if len(t.exprs) == 0 {
		// No expression in it (none at all, or only empty ones such as
		// {{}} or {{   }}): the text is used as written, braces included,
		// as the reference renders it (its check finds no expression).
		t.literal = []string{s}
	}
	return t, nil
}

// leadingDot drops the dot of {{ .trigger.x }}, the Go-template spelling
// existing policies use.
func leadingDot(expr string) string {
	if len(expr) > 1 && expr[0] == '.' && (expr[1] == '_' || 'a' <= expr[1] && expr[1] <= 'z' || 'A' <= expr[1] && expr[1] <= 'Z') {
		return expr[1:]
	}
	return expr
}

func (t *template) isLiteral() bool { return len(t.exprs) == 0 }

func (t *template) render(vars map[string]any) (string, error) {
	if t.isLiteral() {
		return t.literal[0], nil
	}
	var b strings.Builder
	for i, prg := range t.exprs {
		b.WriteString(t.literal[i])
		v, _, err := prg.Eval(vars)
		if err != nil {
			return "", &EvalError{Field: t.field, Err: fmt.Errorf("evaluating %q: %w", t.source, err)}
		}
		if s, ok := v.Value().(string); ok {
			b.WriteString(s)
			continue
		}
		if !t.anyResult {
			return "", &EvalError{Field: t.field, Err: fmt.Errorf("evaluating %q: a segment returned %s %v, and a template segment must return a string; convert it with string(...)", t.source, v.Type().TypeName(), v.Value())}
		}
		b.WriteString(format(v))
	}
	b.WriteString(t.literal[len(t.literal)-1])
	return b.String(), nil
}

// metadataTemplate is the metadata of a rendered object.
type metadataTemplate struct {
	name, generateName, namespace *template
	labels, annotations           []pairTemplate
}

type pairTemplate struct{ key, value *template }

type metadataRendered struct {
	Name, GenerateName, Namespace string
	Labels, Annotations           map[string]string
}

// metadata compiles the metadata of a template, at path, and judges what
// is literal as the API server would: a name must be a DNS subdomain, a
// generateName a prefix of one (not both set), a namespace a DNS label,
// label keys qualified names and values label values, annotation keys
// qualified names. Templated values are judged when rendered.
func (c *compiler) metadata(path *field.Path, md quotav1alpha1.TemplateMetadata) (*metadataTemplate, error) {
	m := &metadataTemplate{}
	var err error
	if md.Name != "" && md.GenerateName != "" {
		return nil, invalid(CauseInvalidLiteral, path.Child("generateName").String(), errors.New("metadata.name and metadata.generateName are mutually exclusive: set one of them"))
	}
	for _, f := range []struct {
		name  string
		src   string
		into  **template
		judge func(string) []string
		chars string // what a literal piece of a templated value may hold
	}{
		{"name", md.Name, &m.name, func(s string) []string { return apimachineryvalidation.NameIsDNSSubdomain(s, false) }, "-.abcdefghijklmnopqrstuvwxyz0123456789"},
		{"generateName", md.GenerateName, &m.generateName, func(s string) []string { return apimachineryvalidation.NameIsDNSSubdomain(s, true) }, "-.abcdefghijklmnopqrstuvwxyz0123456789"},
		{"namespace", md.Namespace, &m.namespace, func(s string) []string { return apimachineryvalidation.ValidateNamespaceName(s, false) }, "-abcdefghijklmnopqrstuvwxyz0123456789"},
	} {
		p := path.Child(f.name).String()
		if *f.into, err = c.template(p, f.src); err != nil {
			return nil, err
		}
		t := *f.into
		if f.src == "" {
			continue
		}
		if strings.TrimSpace(f.src) == "" {
			return nil, invalid(CauseInvalidLiteral, p, fmt.Errorf("value cannot be empty: %q is only spaces; remove the field or give it a value", f.src))
		}
		if t.isLiteral() && f.name == "generateName" && !strings.HasSuffix(f.src, "-") {
			return nil, invalid(CauseInvalidLiteral, p, fmt.Errorf("generateName must end with '-': %q would run into the generated suffix; write %q", f.src, f.src+"-"))
		}
		if t.isLiteral() {
			// The text as written (braces and all), as the reference judges it.
			if msgs := f.judge(f.src); len(msgs) > 0 {
				return nil, invalid(CauseInvalidLiteral, p, fmt.Errorf("invalid Kubernetes %s: %q is not a valid %s: %s", f.name, f.src, f.name, strings.Join(msgs, "; ")))
			}
			continue
		}
		for _, piece := range t.literal {
			if i := strings.IndexFunc(piece, func(r rune) bool { return !strings.ContainsRune(f.chars, r) }); i >= 0 {
				return nil, invalid(CauseInvalidLiteral, p, fmt.Errorf("%q outside {{ }} holds %q, which no %s may contain (only lower-case letters, digits and %q)",
					piece, piece[i:i+1], f.name, strings.Trim(f.chars, "abcdefghijklmnopqrstuvwxyz0123456789")))
			}
		}
	}
	if m.labels, err = c.pairs(path.Child("labels"), md.Labels, func(k string) []string { return validation.IsQualifiedName(k) }, validation.IsValidLabelValue); err != nil {
		return nil, err
	}
	if m.annotations, err = c.pairs(path.Child("annotations"), md.Annotations, func(k string) []string { return validation.IsQualifiedName(strings.ToLower(k)) }, nil); err != nil {
		return nil, err
	}
	return m, nil
}

// pairs compiles labels or annotations, in key order.
func (c *compiler) pairs(path *field.Path, src map[string]string, judgeKey, judgeValue func(string) []string) ([]pairTemplate, error) {
	keys := make([]string, 0, len(src))
	for k := range src {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []pairTemplate
	for _, k := range keys {
		p := path.Key(k).String()
		kt, err := c.template(p, k)
		if err != nil {
			return nil, err
		}
		if kt.isLiteral() {
			if msgs := judgeKey(k); len(msgs) > 0 {
				return nil, invalid(CauseInvalidLiteral, p, fmt.Errorf("%q is not a valid key: %s", k, strings.Join(msgs, "; ")))
			}
		}
		vt, err := c.template(p, src[k])
		if err != nil {
			return nil, err
		}
		if vt.isLiteral() && judgeValue != nil {
			if msgs := judgeValue(src[k]); len(msgs) > 0 {
				return nil, invalid(CauseInvalidLiteral, p, fmt.Errorf("%q is not a valid value: %s", src[k], strings.Join(msgs, "; ")))
			}
		}
		out = append(out, pairTemplate{kt, vt})
	}
	return out, nil
}

func (m *metadataTemplate) render(vars map[string]any) (metadataRendered, error) {
	var out metadataRendered
	var err error
	if out.Name, err = m.name.render(vars); err != nil {
		return out, err
	}
	if out.GenerateName, err = m.generateName.render(vars); err != nil {
		return out, err
	}
	if out.Namespace, err = m.namespace.render(vars); err != nil {
		return out, err
	}
	if out.Labels, err = renderPairs(m.labels, vars); err != nil {
		return out, err
	}
	if out.Annotations, err = renderPairs(m.annotations, vars); err != nil {
		return out, err
	}
	return out, nil
}

func renderPairs(pairs []pairTemplate, vars map[string]any) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, err := p.key.render(vars)
		if err != nil {
			return nil, err
		}
		v, err := p.value.render(vars)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// consumerTemplate is a consumerRef whose name and namespace may be
// templates.
type consumerTemplate struct {
	group, kind     string
	name, namespace *template
	// absent: the template names no consumer (optional in claim templates,
	// as in the reference implementation): the consumer is the project
	// whose control plane the request came to. Rendered as an empty
	// consumerRef, which admission refuses at the root.
	absent bool
}

func (c *compiler) consumer(path *field.Path, ref quotav1alpha1.TemplateConsumerRef) (*consumerTemplate, error) {
	if ref == (quotav1alpha1.TemplateConsumerRef{}) {
		return &consumerTemplate{absent: true}, nil
	}
	if strings.TrimSpace(ref.Name) == "" {
		return nil, invalid(CauseInvalidLiteral, path.Child("name").String(), errors.New("value cannot be empty: name the consumer charged, for example {{ trigger.metadata.name }}"))
	}
	t := &consumerTemplate{group: ref.APIGroup, kind: ref.Kind}
	var err error
	if t.name, err = c.template(path.Child("name").String(), ref.Name); err != nil {
		return nil, err
	}
	if t.namespace, err = c.template(path.Child("namespace").String(), ref.Namespace); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *consumerTemplate) render(vars map[string]any) (quotav1alpha1.ConsumerRef, error) {
	if t.absent {
		return quotav1alpha1.ConsumerRef{}, nil
	}
	out := quotav1alpha1.ConsumerRef{APIGroup: t.group, Kind: t.kind}
	var err error
	if out.Name, err = t.name.render(vars); err != nil {
		return out, err
	}
	if out.Namespace, err = t.namespace.render(vars); err != nil {
		return out, err
	}
	if out.Name == "" {
		return out, errors.New("consumerRef.name rendered empty")
	}
	return out, nil
}

// dimensions compiles dimensions whose keys and values may be templates.
func (c *compiler) dimensions(path *field.Path, dims []quotav1alpha1.TemplateDimension) ([]pairTemplate, error) {
	var out []pairTemplate
	for j, d := range dims {
		k, err := c.template(path.Index(j).Child("key").String(), d.Key)
		if err != nil {
			return nil, err
		}
		v, err := c.template(path.Index(j).Child("value").String(), d.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, pairTemplate{k, v})
	}
	return out, nil
}

func renderDimensions(dims []pairTemplate, vars map[string]any) ([]quotav1alpha1.Dimension, error) {
	var out []quotav1alpha1.Dimension
	for _, d := range dims {
		k, err := d.key.render(vars)
		if err != nil {
			return nil, err
		}
		v, err := d.value.render(vars)
		if err != nil {
			return nil, err
		}
		out = append(out, quotav1alpha1.Dimension{Key: k, Value: v})
	}
	return out, nil
}

// format writes an amount segment's value: integers as integers.
func format(v ref.Val) string {
	switch x := v.Value().(type) {
	case string:
		return x
	case float64:
		if x == math.Trunc(x) {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return fmt.Sprint(x)
	}
}
