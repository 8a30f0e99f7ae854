package requests

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// ruleCostLimit bounds one evaluation of an approval rule.
const ruleCostLimit = 1_000_000

// env is the CEL environment of approval rules: request, consumer,
// organization (objects, as maps) and usage (limit, allocated, available).
// Built once; a *cel.Env is safe to share.
var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("request", cel.DynType),
		cel.Variable("consumer", cel.DynType),
		cel.Variable("organization", cel.DynType),
		cel.Variable("usage", cel.MapType(cel.StringType, cel.IntType)),
	)
})

// Compile checks an approval rule's expression: it must compile and be
// boolean. The error is the compiler's, ready for a condition message.
func Compile(expr string) (cel.Program, error) {
	e, err := env()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("spec.expression does not compile: %w", iss.Err())
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("spec.expression must be true or false for a request, not %s", t)
	}
	return e.Program(ast, cel.CostLimit(ruleCostLimit))
}

// ruleInput is what a rule is evaluated on.
type ruleInput struct {
	request, consumer, organization map[string]any
	usage                           map[string]int64
}

// compiledRule is one ready rule.
type compiledRule struct {
	name  string
	types map[string]bool
	prog  cel.Program
}

// approvingRule returns the first rule, by name, that approves in: its name,
// or "" when none does. Rules that fail to evaluate approve nothing; their
// errors are returned for the log.
func approvingRule(rules []compiledRule, resourceType string, in ruleInput) (string, []error) {
	byName := slices.Clone(rules) // the caller's order is its own
	slices.SortFunc(byName, func(a, b compiledRule) int { return strings.Compare(a.name, b.name) })
	var errs []error
	for _, r := range byName {
		if len(r.types) > 0 && !r.types[resourceType] {
			continue
		}
		out, _, err := r.prog.Eval(map[string]any{
			"request": in.request, "consumer": in.consumer, "organization": in.organization, "usage": in.usage,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("rule %s: %w", r.name, err))
			continue
		}
		if ok, isBool := out.Value().(bool); isBool && ok {
			return r.name, nil
		}
	}
	return "", errs
}

// compileRule compiles a QuotaApprovalRule.
func compileRule(r *quotav1alpha1.QuotaApprovalRule) (compiledRule, error) {
	prog, err := Compile(r.Spec.Expression)
	if err != nil {
		return compiledRule{}, err
	}
	c := compiledRule{name: r.Name, prog: prog}
	if len(r.Spec.ResourceTypes) > 0 {
		c.types = map[string]bool{}
		for _, t := range r.Spec.ResourceTypes {
			c.types[string(t)] = true
		}
	}
	return c, nil
}

// toMap is an object as CEL sees it: its JSON form.
func toMap(obj any) map[string]any {
	if obj == nil {
		return map[string]any{}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return map[string]any{}
	}
	return m
}
