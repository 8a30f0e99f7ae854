package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// Reasons of a policy's Ready condition.
const (
	ReasonReady                     = "Ready"
	ReasonDisabled                  = "Disabled"
	ReasonInvalidConstraint         = "InvalidConstraint"
	ReasonInvalidTemplate           = "InvalidTemplate"
	ReasonResourceTypeNotRegistered = "ResourceTypeNotRegistered"
)

// Error is a compile error with the reason it maps to.
type Error struct {
	Reason string
	Field  string
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable("trigger", cel.DynType),
		cel.Variable("user", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("requestInfo", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		panic(err)
	}
	return e
}()

// costLimit bounds the work of one expression.
const costLimit = 1_000_000

func compile(expr string) (cel.Program, *cel.Ast, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, iss.Err()
	}
	prg, err := env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, nil, err
	}
	return prg, ast, nil
}

// readsRequest reports whether a checked expression reads `user` or
// `requestInfo`.
func readsRequest(ast *cel.Ast) bool {
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == "user" || r.Name == "requestInfo" {
			return true
		}
	}
	return false
}

// template is text with {{ CEL }} segments.
type template struct {
	literal []string      // len(exprs)+1 pieces of text
	exprs   []cel.Program // between them
	source  string
}

func parseTemplate(s string) (*template, error) {
	t := &template{source: s}
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if strings.Contains(rest, "}}") {
				return nil, errors.New(`"}}" without "{{"`)
			}
			t.literal = append(t.literal, rest)
			return t, nil
		}
		j := strings.Index(rest[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf(`"{{" at offset %d is not closed with "}}"`, len(s)-len(rest)+i)
		}
		t.literal = append(t.literal, rest[:i])
		expr := strings.TrimSpace(rest[i+2 : i+j])
		if expr == "" {
			return nil, errors.New("empty {{ }} segment")
		}
		prg, _, err := compile(expr)
		if err != nil {
			return nil, fmt.Errorf("{{ %s }}: %w", expr, err)
		}
		t.exprs = append(t.exprs, prg)
		rest = rest[i+j+2:]
	}
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
			return "", fmt.Errorf("evaluating %q: %w", t.source, err)
		}
		b.WriteString(format(v))
	}
	b.WriteString(t.literal[len(t.literal)-1])
	return b.String(), nil
}

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

type request struct {
	resourceType *template
	amount       int64     // when constant
	amountExpr   *template // when computed
	dims         [][2]*template
}

// Compiled is a compiled ClaimCreationPolicy.
type Compiled struct {
	Name        string
	Generation  int64
	Group, Kind string
	constraints []cel.Program
	// constraintExprs are the constraints' sources, for messages.
	constraintExprs []string
	consumer        struct{ group, kind string }
	consumerNS      *template
	consumerNm      *template
	requests        []request
	metaName        *template
	metaGenName     *template
	// constraintsReadRequest: a constraint reads user or requestInfo.
	constraintsReadRequest bool
	// LiteralResourceTypes are the resource types written without templates,
	// which must be registered for the policy to be Ready.
	LiteralResourceTypes []string
}

// Compile compiles a policy. The error is an *Error naming the field and the
// reason for the Ready condition.
func Compile(p *quotav1alpha1.ClaimCreationPolicy) (*Compiled, error) {
	c := &Compiled{Name: p.Name, Generation: p.Generation, Kind: p.Spec.Trigger.Resource.Kind}
	gv := p.Spec.Trigger.Resource.APIVersion
	if i := strings.Index(gv, "/"); i >= 0 {
		c.Group = gv[:i]
	}
	for i, con := range p.Spec.Trigger.Constraints {
		prg, ast, err := compile(con.Expression)
		field := fmt.Sprintf("spec.trigger.constraints[%d].expression", i)
		if err != nil {
			return nil, &Error{ReasonInvalidConstraint, field, err}
		}
		if out := ast.OutputType(); out != cel.BoolType && out != cel.DynType {
			return nil, &Error{ReasonInvalidConstraint, field, fmt.Errorf("must return bool, returns %s", out)}
		}
		c.constraints = append(c.constraints, prg)
		c.constraintExprs = append(c.constraintExprs, con.Expression)
		c.constraintsReadRequest = c.constraintsReadRequest || readsRequest(ast)
	}
	spec := p.Spec.Target.ResourceClaimTemplate.Spec
	tmpl := func(field, s string) (*template, error) {
		t, err := parseTemplate(s)
		if err != nil {
			return nil, &Error{ReasonInvalidTemplate, field, err}
		}
		return t, nil
	}
	var err error
	base := "spec.target.resourceClaimTemplate."
	c.consumer.group, c.consumer.kind = spec.ConsumerRef.APIGroup, spec.ConsumerRef.Kind
	if c.consumerNm, err = tmpl(base+"spec.consumerRef.name", spec.ConsumerRef.Name); err != nil {
		return nil, err
	}
	if c.consumerNS, err = tmpl(base+"spec.consumerRef.namespace", spec.ConsumerRef.Namespace); err != nil {
		return nil, err
	}
	md := p.Spec.Target.ResourceClaimTemplate.Metadata
	if c.metaName, err = tmpl(base+"metadata.name", md.Name); err != nil {
		return nil, err
	}
	if c.metaGenName, err = tmpl(base+"metadata.generateName", md.GenerateName); err != nil {
		return nil, err
	}
	for i, r := range spec.Requests {
		field := fmt.Sprintf("%sspec.requests[%d]", base, i)
		var rq request
		if rq.resourceType, err = tmpl(field+".resourceType", r.ResourceType); err != nil {
			return nil, err
		}
		if rq.resourceType.isLiteral() {
			c.LiteralResourceTypes = append(c.LiteralResourceTypes, r.ResourceType)
		}
		switch r.Amount.Type {
		case intstr.Int:
			rq.amount = int64(r.Amount.IntVal)
			if rq.amount <= 0 {
				return nil, &Error{ReasonInvalidTemplate, field + ".amount", fmt.Errorf("must be positive, is %d", rq.amount)}
			}
		default:
			if rq.amountExpr, err = tmpl(field+".amount", r.Amount.StrVal); err != nil {
				return nil, err
			}
			if rq.amountExpr.isLiteral() {
				n, perr := strconv.ParseInt(strings.TrimSpace(r.Amount.StrVal), 10, 64)
				if perr != nil || n <= 0 {
					return nil, &Error{ReasonInvalidTemplate, field + ".amount", fmt.Errorf("%q is neither a positive integer nor a {{ CEL }} expression", r.Amount.StrVal)}
				}
				rq.amount, rq.amountExpr = n, nil
			}
		}
		for j, d := range r.Dimensions {
			v, err := tmpl(fmt.Sprintf("%s.dimensions[%d].value", field, j), d.Value)
			if err != nil {
				return nil, err
			}
			k, _ := parseTemplate(d.Key)
			rq.dims = append(rq.dims, [2]*template{k, v})
		}
		c.requests = append(c.requests, rq)
	}
	return c, nil
}

// Input is what a policy sees of one create.
type Input struct {
	Object      map[string]any
	User        map[string]any
	RequestInfo map[string]any
}

// Rendered is a claim a policy asks for.
type Rendered struct {
	Name, GenerateName string
	Spec               quotav1alpha1.ResourceClaimSpec
}

// ConstraintsReadRequest reports whether a constraint reads `user` or
// `requestInfo`: whether the policy applies then depends on the request, not
// only on the object.
func (c *Compiled) ConstraintsReadRequest() bool { return c.constraintsReadRequest }

// Applies evaluates the constraints only: whether the policy applies to one
// create.
func (c *Compiled) Applies(in Input) (bool, error) {
	return c.applies(in.vars())
}

func (in Input) vars() map[string]any {
	return map[string]any{"trigger": in.Object, "user": in.User, "requestInfo": in.RequestInfo}
}

func (c *Compiled) applies(vars map[string]any) (bool, error) {
	for i, prg := range c.constraints {
		v, _, err := prg.Eval(vars)
		if err != nil {
			return false, fmt.Errorf("spec.trigger.constraints[%d].expression %q: %w", i, c.constraintExprs[i], err)
		}
		b, ok := v.(types.Bool)
		if !ok {
			return false, fmt.Errorf("spec.trigger.constraints[%d].expression %q returned %s, not bool", i, c.constraintExprs[i], v.Type())
		}
		if !b {
			return false, nil
		}
	}
	return true, nil
}

// Evaluate applies the policy to one create: false when a constraint is
// false; otherwise the rendered claim.
func (c *Compiled) Evaluate(in Input) (bool, *Rendered, error) {
	vars := in.vars()
	if ok, err := c.applies(vars); !ok || err != nil {
		return false, nil, err
	}
	out := &Rendered{}
	var err error
	if out.Name, err = c.metaName.render(vars); err != nil {
		return false, nil, err
	}
	if out.GenerateName, err = c.metaGenName.render(vars); err != nil {
		return false, nil, err
	}
	out.Spec.ConsumerRef = quotav1alpha1.ConsumerRef{APIGroup: c.consumer.group, Kind: c.consumer.kind}
	if out.Spec.ConsumerRef.Name, err = c.consumerNm.render(vars); err != nil {
		return false, nil, err
	}
	if out.Spec.ConsumerRef.Namespace, err = c.consumerNS.render(vars); err != nil {
		return false, nil, err
	}
	if out.Spec.ConsumerRef.Name == "" {
		return false, nil, errors.New("consumerRef.name rendered empty")
	}
	for _, r := range c.requests {
		rt, err := r.resourceType.render(vars)
		if err != nil {
			return false, nil, err
		}
		amount := r.amount
		if r.amountExpr != nil {
			s, err := r.amountExpr.render(vars)
			if err != nil {
				return false, nil, err
			}
			if amount, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64); err != nil || amount <= 0 {
				return false, nil, fmt.Errorf("amount of %s rendered %q, not a positive integer", rt, s)
			}
		}
		req := quotav1alpha1.ResourceRequest{ResourceType: quotav1alpha1.ResourceType(rt), Amount: amount}
		for _, d := range r.dims {
			k, err := d[0].render(vars)
			if err != nil {
				return false, nil, err
			}
			v, err := d[1].render(vars)
			if err != nil {
				return false, nil, err
			}
			req.Dimensions = append(req.Dimensions, quotav1alpha1.Dimension{Key: k, Value: v})
		}
		out.Spec.Requests = append(out.Spec.Requests, req)
	}
	return true, out, nil
}
