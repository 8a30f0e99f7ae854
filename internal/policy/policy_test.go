package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func machinePolicy(constraint, name string, amount intstr.IntOrString) *quotav1alpha1.ClaimCreationPolicy {
	p := &quotav1alpha1.ClaimCreationPolicy{}
	p.Name = "machines"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "cluster.k8s.io/v1alpha1", Kind: "Machine"}
	if constraint != "" {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: constraint}}
	}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: name},
		Requests: []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "compute.example.com/vcpus", Amount: amount,
			Dimensions: []quotav1alpha1.TemplateDimension{{Key: "location", Value: "{{ trigger.spec.location }}"}}}},
	}
	return p
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *quotav1alpha1.ClaimCreationPolicy
		cause  string
		field  string
	}{
		{"bad CEL", machinePolicy("trigger.spec.(", "p", intstr.FromInt(1)), CauseConstraintInvalid, "spec.trigger.constraints[0].expression"},
		{"not bool", machinePolicy("'yes'", "p", intstr.FromInt(1)), CauseConstraintNotBool, "spec.trigger.constraints[0].expression"},
		{"unclosed template", machinePolicy("", "{{ trigger.metadata.name", intstr.FromInt(1)), CauseTemplateInvalid, "spec.target.resourceClaimTemplate.spec.consumerRef.name"},
		{"bad template CEL", machinePolicy("", "{{ trigger.metadata.name + }}", intstr.FromInt(1)), CauseTemplateInvalid, "spec.target.resourceClaimTemplate.spec.consumerRef.name"},
		{"bad amount", machinePolicy("", "p", intstr.FromString("lots")), CauseInvalidLiteral, "spec.target.resourceClaimTemplate.spec.requests[0].amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.policy, Options{})
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a policy error", err)
			}
			if pe.Reason != ReasonValidationFailed || pe.Cause != tc.cause || pe.Field != tc.field {
				t.Errorf("got %s (%s) at %s, want %s (%s) at %s", pe.Reason, pe.Cause, pe.Field, ReasonValidationFailed, tc.cause, tc.field)
			}
			if !strings.HasPrefix(pe.Error(), tc.field+": ") {
				t.Errorf("message %q does not start with the field path", pe.Error())
			}
		})
	}
}

func TestEvaluateComputesAmountAndNames(t *testing.T) {
	c, err := Compile(machinePolicy("trigger.spec.cpus > 0", "{{ trigger.metadata.namespace }}", intstr.FromString("{{ trigger.spec.cpus * 1000 }}")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"metadata": map[string]any{"namespace": "proj-a"}, "spec": map[string]any{"cpus": int64(4), "location": "dfw"}}
	ok, r, err := c.Evaluate(Input{Object: obj})
	if err != nil || !ok {
		t.Fatalf("ok=%v err=%v", ok, err)
	}
	want := quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "proj-a"},
		Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "compute.example.com/vcpus", Amount: 4000,
			Dimensions: []quotav1alpha1.Dimension{{Key: "location", Value: "dfw"}}}},
	}
	if diff := cmp.Diff(want, r.Spec); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	obj["spec"].(map[string]any)["cpus"] = int64(0)
	if ok, _, err := c.Evaluate(Input{Object: obj}); ok || err != nil {
		t.Errorf("a false constraint: ok=%v err=%v", ok, err)
	}
}

// FuzzTemplate parses arbitrary template text: it never panics, text
// without braces renders to itself, and every refusal is a policy error
// naming the field.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"plain", "{{ trigger.metadata.name }}", "{{ .trigger.metadata.name }}", "a-{{ 1 + 2 }}-b", "{{", "}}", "{{}}", "{{ {{ }} }}", "}}{{ 1 }}"} {
		f.Add(s)
	}
	c := newCompiler(Options{TriggerSchema: configMapSchema()}, "ConfigMap", false)
	f.Fuzz(func(t *testing.T, s string) {
		tp, err := c.template("metadata.name", s)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Field != "metadata.name" || pe.Reason != ReasonValidationFailed {
				t.Fatalf("%q: refused with %v, not a policy error naming the field", s, err)
			}
			return
		}
		out, err := tp.render(map[string]any{"trigger": map[string]any{}, "user": map[string]any{}, "requestInfo": map[string]any{}})
		if err == nil && tp.isLiteral() && !strings.Contains(s, "{{") && out != s {
			t.Fatalf("literal %q rendered %q", s, out)
		}
	})
}

func TestConstraintsReadRequest(t *testing.T) {
	for _, tc := range []struct {
		constraint string
		want       bool
	}{
		{"", false},
		{"trigger.spec.cpus > 0", false},
		{"user.name == 'alice'", true},
		{"has(user.extra) || trigger.spec.cpus > 0", true},
		{"requestInfo.dryRun == false", true},
	} {
		t.Run(tc.constraint, func(t *testing.T) {
			c, err := Compile(machinePolicy(tc.constraint, "p", intstr.FromInt(1)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ConstraintsReadRequest(); got != tc.want {
				t.Errorf("ConstraintsReadRequest() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAppliesEvaluatesConstraintsOnly(t *testing.T) {
	// The consumer name reads user: rendering fails without it, deciding
	// whether the policy applies does not.
	c, err := Compile(machinePolicy("trigger.spec.cpus > 0", "{{ user.name }}", intstr.FromInt(1)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"spec": map[string]any{"cpus": int64(2)}}
	if ok, err := c.Applies(Input{Object: obj}); !ok || err != nil {
		t.Errorf("Applies: ok=%v err=%v, want true", ok, err)
	}
	if _, _, err := c.Evaluate(Input{Object: obj}); err == nil {
		t.Error("Evaluate rendered a template that reads user without a user")
	}
}

// podPolicy charges a Pod as examples/workloads does: one pod, and the sum
// of its containers' cpu requests (millicores) and memory requests (bytes),
// 0 for a container without one.
func podPolicy(withPods bool) *quotav1alpha1.ClaimCreationPolicy {
	p := &quotav1alpha1.ClaimCreationPolicy{}
	p.Name = "pods"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Pod"}
	sum := func(name, scale string) intstr.IntOrString {
		return intstr.FromString("{{ string(trigger.spec.containers.map(c, has(c.resources) && has(c.resources.requests) && '" + name +
			"' in c.resources.requests ? int(quantity(c.resources.requests['" + name + "']).asApproximateFloat()" + scale + " + 0.5) : 0).sum()) }}")
	}
	var requests []quotav1alpha1.ClaimTemplateRequest
	if withPods {
		requests = append(requests, quotav1alpha1.ClaimTemplateRequest{ResourceType: "core/pods", Amount: intstr.FromInt32(1)})
	}
	requests = append(requests,
		quotav1alpha1.ClaimTemplateRequest{ResourceType: "core/requests.cpu", Amount: sum("cpu", " * 1000.0")},
		quotav1alpha1.ClaimTemplateRequest{ResourceType: "core/requests.memory", Amount: sum("memory", "")})
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"},
		Requests:    requests,
	}
	return p
}

func pod(requests ...map[string]any) map[string]any {
	var containers []any
	for _, r := range requests {
		c := map[string]any{"name": "c", "image": "busybox"}
		if r != nil {
			c["resources"] = map[string]any{"requests": r}
		}
		containers = append(containers, c)
	}
	return map[string]any{"metadata": map[string]any{"namespace": "team-a", "name": "p"}, "spec": map[string]any{"containers": containers}}
}

// TestARequestRenderedAsZeroChargesNothing: a request whose amount renders
// exactly 0 is left out of the claim, and when every request renders 0
// there is no claim (false, as for a false constraint); a negative amount
// still cannot be evaluated.
func TestARequestRenderedAsZeroChargesNothing(t *testing.T) {
	withPods, err := Compile(podPolicy(true), Options{})
	if err != nil {
		t.Fatal(err)
	}
	requestsOnly, err := Compile(podPolicy(false), Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(rt string, n int64) quotav1alpha1.ResourceRequest {
		return quotav1alpha1.ResourceRequest{ResourceType: quotav1alpha1.ResourceType(rt), Amount: n}
	}
	for _, tc := range []struct {
		name     string
		policy   *Compiled
		pod      map[string]any
		charges  bool
		requests []quotav1alpha1.ResourceRequest
	}{
		{"requests", withPods, pod(map[string]any{"cpu": "250m", "memory": "128Mi"}, map[string]any{"cpu": "250m", "memory": "128Mi"}), true,
			[]quotav1alpha1.ResourceRequest{req("core/pods", 1), req("core/requests.cpu", 500), req("core/requests.memory", 268435456)}},
		{"no requests: the pod alone", withPods, pod(nil), true, []quotav1alpha1.ResourceRequest{req("core/pods", 1)}},
		{"cpu only: no memory request", withPods, pod(nil, map[string]any{"cpu": "100m"}), true,
			[]quotav1alpha1.ResourceRequest{req("core/pods", 1), req("core/requests.cpu", 100)}},
		{"no requests, nothing else to charge: no claim", requestsOnly, pod(nil, nil), false, nil},
		{"requests of 0: no claim", requestsOnly, pod(map[string]any{"cpu": "0", "memory": "0"}), false, nil},
		{"one nonzero request: a claim of it", requestsOnly, pod(map[string]any{"memory": "1"}), true,
			[]quotav1alpha1.ResourceRequest{req("core/requests.memory", 1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, r, err := tc.policy.Evaluate(Input{Object: tc.pod})
			if err != nil || ok != tc.charges {
				t.Fatalf("Evaluate = %v, %v; want %v, no error", ok, err, tc.charges)
			}
			if !ok {
				if r != nil {
					t.Fatalf("no claim to charge, yet rendered %+v", r.Spec)
				}
				return
			}
			if diff := cmp.Diff(tc.requests, r.Spec.Requests); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}

	// Zero in any form is zero without the registration's units; a
	// negative amount is an amount the object cannot be charged.
	cm := func(amount string) (bool, *Rendered, error) {
		p := machinePolicy("", "p", intstr.FromString("{{ trigger.spec.amount }}"))
		c, err := Compile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Evaluate(Input{Object: map[string]any{"spec": map[string]any{"amount": amount, "location": "dfw"}}})
	}
	for _, zero := range []string{"0", "0Mi", " 0 ", "0.0"} {
		if ok, r, err := cm(zero); ok || r != nil || err != nil {
			t.Errorf("amount %q: %v, %v, %v; want no claim", zero, ok, r, err)
		}
	}
	for _, negative := range []string{"-1", "-500m"} {
		_, _, err := cm(negative)
		var ee *EvalError
		if !errors.As(err, &ee) || !ee.Amount || !strings.Contains(err.Error(), "is negative") {
			t.Errorf("amount %q: %v; want an amount error saying it is negative", negative, err)
		}
	}
}
