package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy/fieldcheck"
)

// Reasons of a policy's Ready condition, those of the reference
// implementation; the precise cause is in the message (and Error.Cause).
const (
	ReasonReady            = "PolicyReady"
	ReasonValidationFailed = "ValidationFailed"
	ReasonDisabled         = "PolicyDisabled"
)

// Causes of a ValidationFailed policy (Error.Cause); the message says the
// same in words.
const (
	CauseConstraintInvalid         = "ConstraintInvalid"
	CauseConstraintNotBool         = "ConstraintNotBool"
	CauseCostTooHigh               = "CostTooHigh"
	CauseTemplateInvalid           = "TemplateInvalid"
	CauseInvalidLiteral            = "InvalidLiteral"
	CauseReadsRequest              = "ReadsRequest"
	CauseResourceTypeNotRegistered = "ResourceTypeNotRegistered"
	// CauseTriggerInvalid: spec.trigger holds what the policy kind does
	// not take.
	CauseTriggerInvalid = "TriggerInvalid"
)

// Error is a compile error: the field it is about, and why.
type Error struct {
	// Reason is the Ready condition's reason (ReasonValidationFailed).
	Reason string
	// Cause is the precise cause, one of the Cause constants.
	Cause string
	// Field is the exact field path, for example
	// spec.trigger.constraints[0].expression.
	Field string
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Field, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

func invalid(cause, field string, err error) *Error {
	return &Error{Reason: ReasonValidationFailed, Cause: cause, Field: field, Err: err}
}

// Options are how a policy is compiled.
type Options struct {
	// TriggerSchema, when set, types `trigger` (from the trigger kind's
	// OpenAPI schema) so that the cost of each expression can be estimated
	// and one estimated over EstimatedCostLimit refused; nil means dynamic
	// typing (no estimate: CostLimit is enforced at evaluation only).
	TriggerSchema *spec.Schema
	// ServedSchemas are the schemas of every version the trigger kind
	// serves (admission evaluates objects in the version the client sent).
	// An expression reading a field of `trigger` that none of them has is
	// a Warning; empty means TriggerSchema alone; a nil
	// element (a version whose schema is unknown) may have any field.
	ServedSchemas []*spec.Schema
}

// CostLimit bounds the work of one evaluation of one expression, in CEL
// cost units: Kubernetes' limit for one CEL call (about 0.1 s of CPU).
const CostLimit = celconfig.PerCallLimit

// EstimatedCostLimit bounds the estimated cost of one expression: its worst
// case over any object the API server accepts (3 MiB), with `trigger` typed
// from the trigger kind's schema. It is the limit Kubernetes puts on the
// estimate of one CRD validation rule (StaticEstimatedCostLimit): one pass
// over an unbounded list or map fits, a loop nested in another does not.
// The estimate assumes the largest object; real objects cost a small part
// of it, and CostLimit still stops any evaluation that runs away.
const EstimatedCostLimit = 10 * celconfig.PerCallLimit

// requestSizeBound is what the estimate assumes of `user` and `requestInfo`,
// which come from the authenticator and the request line, not the object:
// at most this many groups, extra values, or characters in one string.
const requestSizeBound = 1024

var baseEnv = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())

// newEnv is the CEL environment of policy expressions: the Kubernetes
// libraries, `trigger` (typed when t is set), `user` and `requestInfo`.
func newEnv(t *apiservercel.DeclType) (*cel.Env, error) {
	trigger := cel.DynType
	var decls []*apiservercel.DeclType
	if t != nil {
		trigger = t.CelType()
		decls = append(decls, t)
	}
	set, err := baseEnv.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable("trigger", trigger),
			cel.Variable("user", cel.MapType(cel.StringType, cel.DynType)),
			cel.Variable("requestInfo", cel.MapType(cel.StringType, cel.DynType)),
			hasPathFunction,
		},
		DeclTypes: decls,
		ProgramOptions: []cel.ProgramOption{
			cel.CostLimit(CostLimit),
			cel.CostTracking(&library.CostEstimator{}),
			cel.InterruptCheckFrequency(celconfig.CheckFrequency),
		},
	})
	if err != nil {
		return nil, err
	}
	return set.StoredExpressionsEnv(), nil
}

var dynEnv = func() *cel.Env {
	e, err := newEnv(nil)
	if err != nil {
		panic(err)
	}
	return e
}()

// compiler compiles the expressions of one policy.
type compiler struct {
	// typed types `trigger` from its schema, for cost estimates; nil
	// without a schema.
	typed     *cel.Env
	estimator *costEstimator
	// triggerOnly: the policy is evaluated on stored objects, so `user` and
	// `requestInfo` are refused.
	triggerOnly bool
	// kind and schemas judge the fields expressions read (fields.go).
	kind    string
	schemas []*spec.Schema
	// warnings are what type checking found that does not refuse the
	// policy: fields no served version of the kind declares.
	warnings []Warning
}

// Warning is one finding of type checking that does not make a policy
// invalid, on the field it is about: as Kubernetes' ValidatingAdmissionPolicy
// reports what its type checking finds, the policy stays Ready, and at
// admission an object lacking the field refuses the create.
type Warning struct {
	Field, Message string
}

// newCompiler returns the compiler of one policy. A schema that cannot type
// `trigger` leaves it dynamic, as without a schema.
func newCompiler(o Options, kind string, triggerOnly bool) *compiler {
	c := &compiler{triggerOnly: triggerOnly, kind: kind, schemas: o.ServedSchemas}
	if len(c.schemas) == 0 && o.TriggerSchema != nil {
		c.schemas = []*spec.Schema{o.TriggerSchema}
	}
	if o.TriggerSchema == nil {
		return c
	}
	t := common.SchemaDeclType(&openapi.Schema{Schema: o.TriggerSchema}, true)
	if t == nil {
		return c
	}
	// The type name only has to be unique within the environment.
	t = t.MaybeAssignTypeName("quotaplane.trigger." + kind)
	env, err := newEnv(t)
	if err != nil {
		return c
	}
	c.typed, c.estimator = env, &costEstimator{CostEstimator: library.CostEstimator{SizeEstimator: &sizeEstimator{trigger: t}}}
	return c
}

// expr compiles one expression: the program (over dynamically typed
// values, as admission and the grant engine evaluate it) and its checked
// form, typed from the trigger's schema when it type-checks against it.
// With a typed `trigger`, an expression whose estimated cost exceeds
// EstimatedCostLimit is refused. cause is the Cause of a compile error, "" when it is
// the caller's to choose; errors are plain (the caller names the field).
func (c *compiler) expr(field, src string) (cel.Program, *cel.Ast, string, error) {
	ast, iss := dynEnv.Compile(src)
	if iss.Err() != nil {
		return nil, nil, "", iss.Err()
	}
	if c.triggerOnly {
		if v := requestVariable(ast); v != "" {
			return nil, nil, CauseReadsRequest, fmt.Errorf("reads %s, which a GrantCreationPolicy does not have: its expressions are evaluated on stored objects, not on requests, and see only trigger", v)
		}
	}
	if err := fieldcheck.UnknownField(ast, c.kind, c.schemas); err != nil {
		// A warning, as Kubernetes' type checking: the reference accepts
		// such policies (its `trigger` is untyped), and an object without
		// the field refuses the create at admission.
		c.warnings = append(c.warnings, Warning{Field: field, Message: fmt.Sprintf("%q %v", src, err)})
	}
	prg, err := dynEnv.Program(ast)
	if err != nil {
		return nil, nil, "", err
	}
	if c.typed == nil {
		return prg, ast, "", nil
	}
	// An expression that does not type-check against the schema (it reads
	// a field the schema does not declare, as objects preserving unknown
	// fields allow) is not estimated: its cost is bounded at evaluation.
	typed, iss := c.typed.Compile(src)
	if iss.Err() != nil {
		return prg, ast, "", nil
	}
	est, err := c.typed.EstimateCost(typed, c.estimator)
	if err != nil {
		return nil, nil, CauseCostTooHigh, fmt.Errorf("estimating the cost: %w", err)
	}
	if est.Max > EstimatedCostLimit {
		return nil, nil, CauseCostTooHigh, fmt.Errorf("estimated cost %s exceeds the limit %d of one expression; the estimate is the worst case over any object the API server accepts, so do not nest loops over lists or maps, iterate fewer of them, or bound them in the trigger kind's schema (maxItems, maxProperties, maxLength)",
			formatCost(est.Max), EstimatedCostLimit)
	}
	return prg, typed, "", nil
}

func formatCost(c uint64) string {
	if c == math.MaxUint64 {
		return "unbounded"
	}
	return strconv.FormatUint(c, 10)
}

// sizeEstimator bounds the size of what an expression reads: from the
// trigger's schema (the maxima Kubernetes derives for CRD validation rules),
// and requestSizeBound for `user` and `requestInfo`.
type sizeEstimator struct {
	trigger *apiservercel.DeclType
}

func (s *sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	switch path[0] {
	case "user", "requestInfo":
		return &checker.SizeEstimate{Min: 0, Max: requestSizeBound}
	case "trigger":
	default:
		return nil
	}
	t := s.trigger
	for _, name := range path[1:] {
		switch name {
		case "@items", "@values":
			t = t.ElemType
		case "@keys":
			t = t.KeyType
		default:
			f, ok := t.Fields[name]
			if !ok {
				return nil
			}
			t = f.Type
		}
		if t == nil {
			return nil
		}
	}
	return &checker.SizeEstimate{Min: 0, Max: uint64(t.MaxElements)}
}

func (s *sizeEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

// costEstimator is the Kubernetes libraries' estimator, knowing besides that
// a number's decimal form is at most 20 characters: an amount like
// string(trigger.spec.memoryGiB) + "Gi" costs little.
type costEstimator struct {
	library.CostEstimator
}

func (c *costEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	switch overloadID {
	case overloads.IntToString, overloads.UintToString:
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}, ResultSize: &checker.SizeEstimate{Min: 1, Max: 20}}
	}
	return c.CostEstimator.EstimateCallCost(function, overloadID, target, args)
}

// requestVariable names the request variable (`user` or `requestInfo`) a
// checked expression reads, or "".
func requestVariable(ast *cel.Ast) string {
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r.Name == "user" || r.Name == "requestInfo" {
			return r.Name
		}
	}
	return ""
}

// constraints are a policy's compiled trigger constraints.
type constraints struct {
	programs []cel.Program
	// exprs are the sources, for messages.
	exprs []string
	// readRequest: a constraint reads user or requestInfo.
	readRequest bool
}

func (c *compiler) constraints(cons []quotav1alpha1.Constraint) (*constraints, error) {
	out := &constraints{}
	for i, con := range cons {
		field := fmt.Sprintf("spec.trigger.constraints[%d].expression", i)
		prg, ast, cause, err := c.expr(field, con.Expression)
		if err != nil {
			if cause == "" {
				cause = CauseConstraintInvalid
			}
			return nil, invalid(cause, field, err)
		}
		// As in the reference implementation, a constraint must be a bool
		// by its form, not only when the object happens to hold one.
		if t := ast.OutputType(); t == cel.DynType {
			return nil, invalid(CauseConstraintNotBool, field, fmt.Errorf("expression must return bool, got dyn (a field's value); compare it, for example %s == true", con.Expression))
		} else if t != cel.BoolType {
			return nil, invalid(CauseConstraintNotBool, field, fmt.Errorf("expression must return bool, got %s", t))
		}
		out.programs = append(out.programs, prg)
		out.exprs = append(out.exprs, con.Expression)
		out.readRequest = out.readRequest || requestVariable(ast) != ""
	}
	return out, nil
}

func (c *constraints) applies(vars map[string]any) (bool, error) {
	for i, prg := range c.programs {
		v, _, err := prg.Eval(vars)
		if err != nil {
			return false, &EvalError{Field: fmt.Sprintf("spec.trigger.constraints[%d].expression", i), Err: fmt.Errorf("%q: %w", c.exprs[i], err)}
		}
		b, ok := v.(types.Bool)
		if !ok {
			return false, &EvalError{Field: fmt.Sprintf("spec.trigger.constraints[%d].expression", i), Err: fmt.Errorf("%q returned %s, not bool", c.exprs[i], v.Type())}
		}
		if !b {
			return false, nil
		}
	}
	return true, nil
}

// triggerGroup is the API group of a trigger's apiVersion.
func triggerGroup(r quotav1alpha1.TriggerResource) string {
	if i := strings.Index(r.APIVersion, "/"); i >= 0 {
		return r.APIVersion[:i]
	}
	return ""
}

type request struct {
	resourceType *template
	quantity     string    // when a constant quantity ("2Gi")
	amountField  string    // the path of the amount, for errors
	amount       int64     // when constant
	amountExpr   *template // when computed
	dims         []pairTemplate
}

// compiledPolicy is what both kinds of compiled policy share: the trigger's
// constraints, the rendered object's metadata and consumer.
type compiledPolicy struct {
	Name        string
	Generation  int64
	Group, Kind string
	constraints *constraints
	metadata    *metadataTemplate
	consumer    *consumerTemplate
	// LiteralResourceTypes are the resource types written without templates,
	// which must be registered for the policy to be Ready.
	LiteralResourceTypes []string
	// literalFields are their field paths.
	literalFields []string
	// Warnings are what type checking found that does not make the policy
	// invalid (Warning).
	Warnings []Warning
	// NamespaceSelector is spec.trigger.namespaceSelector; nil when unset
	// (governed.Exemptions.OutOfScope).
	NamespaceSelector labels.Selector
}

// compilePolicy compiles the shared parts of a policy whose template is at
// base, and returns the compiler for the rest.
func compilePolicy(om metav1.ObjectMeta, trigger quotav1alpha1.Trigger, base *field.Path, md quotav1alpha1.TemplateMetadata,
	consumer quotav1alpha1.TemplateConsumerRef, o Options, triggerOnly bool) (compiledPolicy, *compiler, error) {
	c := compiledPolicy{Name: om.Name, Generation: om.Generation, Group: triggerGroup(trigger.Resource), Kind: trigger.Resource.Kind}
	comp := newCompiler(o, c.Kind, triggerOnly)
	var err error
	if trigger.NamespaceSelector != nil {
		if c.NamespaceSelector, err = metav1.LabelSelectorAsSelector(trigger.NamespaceSelector); err != nil {
			return c, nil, invalid(CauseTriggerInvalid, "spec.trigger.namespaceSelector", fmt.Errorf("%w; write matchLabels, or matchExpressions with operators In, NotIn, Exists and DoesNotExist", err))
		}
	}
	if c.constraints, err = comp.constraints(trigger.Constraints); err != nil {
		return c, nil, err
	}
	if c.metadata, err = comp.metadata(base.Child("metadata"), md); err != nil {
		return c, nil, err
	}
	if c.consumer, err = comp.consumer(base.Child("spec", "consumerRef"), consumer); err != nil {
		return c, nil, err
	}
	return c, comp, nil
}

// literalResourceType records a resource type that must be registered.
func (c *compiledPolicy) literalResourceType(rt string, path *field.Path) {
	c.LiteralResourceTypes = append(c.LiteralResourceTypes, rt)
	c.literalFields = append(c.literalFields, path.String())
}

// CheckRegistered returns an *Error naming the first literal resource type
// that registered says is not registered, and its field; nil when all are.
func (c *compiledPolicy) CheckRegistered(registered func(resourceType string) bool) error {
	for i, rt := range c.LiteralResourceTypes {
		if !registered(rt) {
			return invalid(CauseResourceTypeNotRegistered, c.literalFields[i], fmt.Errorf("resource type %s is not registered; create its ResourceRegistration, then the policy becomes Ready", rt))
		}
	}
	return nil
}

// Compiled is a compiled ClaimCreationPolicy.
type Compiled struct {
	compiledPolicy
	requests   []request
	quantities []literalQuantity
}

// literalQuantity is an amount written as a quantity.
type literalQuantity struct {
	resourceType string
	literal      bool // the resource type is written without templates
	amount       string
	field        string
}

// CheckUnits returns an *Error naming the first amount written as a
// quantity that cannot be converted: its resource type's registration
// declares no base unit quantity, or the amount is not a whole number of
// base units. nil when every literal quantity converts.
func (c *Compiled) CheckUnits(units Units) error {
	for _, q := range c.quantities {
		if !q.literal {
			continue // known once rendered
		}
		if _, err := ParseAmount(q.amount, q.resourceType, units); err != nil {
			return invalid(CauseInvalidLiteral, q.field, err)
		}
	}
	return nil
}

// Compile compiles a ClaimCreationPolicy. The error is an *Error naming the
// field and the cause.
func Compile(p *quotav1alpha1.ClaimCreationPolicy, o Options) (*Compiled, error) {
	t := p.Spec.Target.ResourceClaimTemplate
	base := field.NewPath("spec", "target", "resourceClaimTemplate")
	cp, comp, err := compilePolicy(p.ObjectMeta, p.Spec.Trigger, base, t.Metadata, t.Spec.ConsumerRef, o, false)
	if err != nil {
		return nil, err
	}
	c := &Compiled{compiledPolicy: cp}
	spec := t.Spec
	for i, r := range spec.Requests {
		path := base.Child("spec", "requests").Index(i)
		amountField := path.Child("amount").String()
		rq := request{amountField: amountField}
		if rq.resourceType, err = comp.template(path.Child("resourceType").String(), r.ResourceType); err != nil {
			return nil, err
		}
		if rq.resourceType.isLiteral() {
			c.literalResourceType(r.ResourceType, path.Child("resourceType"))
		}
		switch r.Amount.Type {
		case intstr.Int:
			rq.amount = int64(r.Amount.IntVal)
			if rq.amount <= 0 {
				return nil, invalid(CauseInvalidLiteral, amountField, fmt.Errorf("must be positive, is %d", rq.amount))
			}
		default:
			if rq.amountExpr, err = comp.amountTemplate(amountField, r.Amount.StrVal); err != nil {
				return nil, err
			}
			if rq.amountExpr.isLiteral() {
				lit := strings.TrimSpace(r.Amount.StrVal)
				n, perr := strconv.ParseInt(lit, 10, 64)
				switch {
				case perr == nil && n > 0:
					rq.amount, rq.amountExpr = n, nil
				case perr == nil:
					return nil, invalid(CauseInvalidLiteral, amountField, fmt.Errorf("must be positive, is %d", n))
				default:
					if q, qerr := resource.ParseQuantity(lit); qerr != nil || q.Sign() <= 0 {
						return nil, invalid(CauseInvalidLiteral, amountField, fmt.Errorf("%q is neither a positive integer, a positive quantity (like 2Gi) nor a {{ CEL }} expression", r.Amount.StrVal))
					}
					// A quantity: converted with the registration's base
					// unit, which CheckUnits requires.
					rq.quantity = lit
					rq.amountExpr = nil
					c.quantities = append(c.quantities, literalQuantity{resourceType: r.ResourceType, literal: rq.resourceType.isLiteral(), amount: lit, field: amountField})
				}
			}
		}
		if rq.dims, err = comp.dimensions(path.Child("dimensions"), r.Dimensions); err != nil {
			return nil, err
		}
		c.requests = append(c.requests, rq)
	}
	c.Warnings = comp.warnings
	return c, nil
}

// Input is what a policy sees of one create.
type Input struct {
	Object      map[string]any
	User        map[string]any
	RequestInfo map[string]any
	// Units converts amounts written as quantities; without it only whole
	// numbers of base units are accepted.
	Units Units
}

// Rendered is a claim a policy asks for: its metadata and spec, rendered.
type Rendered struct {
	Name, GenerateName, Namespace string
	Labels, Annotations           map[string]string
	Spec                          quotav1alpha1.ResourceClaimSpec
}

// ConstraintsReadRequest reports whether a constraint reads `user` or
// `requestInfo`: whether the policy applies then depends on the request, not
// only on the object.
func (c *Compiled) ConstraintsReadRequest() bool { return c.constraints.readRequest }

// Applies evaluates the constraints only: whether the policy applies to one
// create.
func (c *Compiled) Applies(in Input) (bool, error) {
	return c.constraints.applies(in.vars())
}

func (in Input) vars() map[string]any {
	return map[string]any{"trigger": in.Object, "user": in.User, "requestInfo": in.RequestInfo}
}

// Evaluate applies the policy to one create: false when a constraint is
// false; otherwise the rendered claim. A request whose amount renders as
// exactly 0 charges nothing and is left out of the claim; when every request
// renders 0 there is nothing to charge, and Evaluate returns false as for a
// false constraint: no claim. Admission (creates and updates), reviews and
// the charging of existing objects all read this answer, so all of them
// charge such an object alike.
func (c *Compiled) Evaluate(in Input) (bool, *Rendered, error) {
	vars := in.vars()
	if ok, err := c.constraints.applies(vars); !ok || err != nil {
		return false, nil, err
	}
	md, err := c.metadata.render(vars)
	if err != nil {
		return false, nil, err
	}
	out := &Rendered{Name: md.Name, GenerateName: md.GenerateName, Namespace: md.Namespace, Labels: md.Labels, Annotations: md.Annotations}
	if out.Spec.ConsumerRef, err = c.consumer.render(vars); err != nil {
		return false, nil, err
	}
	dropped := 0
	for _, r := range c.requests {
		rt, err := r.resourceType.render(vars)
		if err != nil {
			return false, nil, err
		}
		amount := r.amount
		switch {
		case r.amountExpr != nil:
			s, err := r.amountExpr.render(vars)
			if err != nil {
				return false, nil, err
			}
			if amount, err = renderedAmount(s, rt, in.Units); err != nil {
				return false, nil, &EvalError{Field: r.amountExpr.field, Err: err, Amount: true}
			}
		case r.quantity != "":
			if amount, err = ParseAmount(r.quantity, rt, in.Units); err != nil {
				return false, nil, &EvalError{Field: r.amountField, Err: err, Amount: true}
			}
		}
		req := quotav1alpha1.ResourceRequest{ResourceType: quotav1alpha1.ResourceType(rt), Amount: amount}
		if req.Dimensions, err = renderDimensions(r.dims, vars); err != nil {
			return false, nil, err
		}
		if amount == 0 {
			dropped++
			continue // charges nothing
		}
		out.Spec.Requests = append(out.Spec.Requests, req)
	}
	if dropped > 0 && len(out.Spec.Requests) == 0 {
		return false, nil, nil
	}
	return true, out, nil
}

// EvalError is a failure to evaluate a policy for one object: the field of
// the policy whose expression failed, and why.
type EvalError struct {
	Field string
	Err   error
	// Amount: the expression evaluated, and its value is not an amount of
	// the resource type (its units are read from the registrations).
	Amount bool
}

func (e *EvalError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *EvalError) Unwrap() error { return e.Err }

// KindNotServedWarning is what is said of a policy whose trigger kind is not
// served; hint is kinds.Kind's.
func KindNotServedWarning(tr quotav1alpha1.TriggerResource, hint string) string {
	return fmt.Sprintf("kind %s (apiVersion %s) is not served: %s; the policy charges nothing until it is. Correct spec.trigger.resource, or install the kind", tr.Kind, tr.APIVersion, hint)
}
