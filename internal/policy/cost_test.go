package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/validation/spec"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// configMapSchema is the shape of a ConfigMap's OpenAPI schema: nothing in
// it is bounded, as in Kubernetes.
func configMapSchema() *spec.Schema {
	str := spec.StringProperty()
	strs := spec.ArrayProperty(str)
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"apiVersion": *str,
		"kind":       *str,
		"metadata": {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
			"name": *str, "generateName": *str, "namespace": *str, "uid": *str,
			"labels": *spec.MapProperty(str), "annotations": *spec.MapProperty(str), "finalizers": *strs,
		}}},
		"data":       *spec.MapProperty(str),
		"binaryData": *spec.MapProperty(spec.StrFmtProperty("byte")),
		"immutable":  *spec.BooleanProperty(),
	}}}
}

// nestedAll is depth all() loops over the ConfigMap's data, one inside the
// other.
func nestedAll(depth int) string {
	e := "true"
	for i := depth; i > 0; i-- {
		e = fmt.Sprintf("trigger.data.all(k%d, %s)", i, e)
	}
	return e
}

func configMapPolicy(constraint, name string) *quotav1alpha1.ClaimCreationPolicy {
	p := &quotav1alpha1.ClaimCreationPolicy{}
	p.Name = "configmaps"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	if constraint != "" {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: constraint}}
	}
	p.Spec.Target.ResourceClaimTemplate.Metadata.Name = name
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "core/configmaps", Amount: intstr.FromInt(1)}},
	}
	return p
}

// TestCostEstimate: with `trigger` typed from the ConfigMap's schema, one
// pass over a list or map fits the limit and nested passes do not, in a
// constraint or a template; without a schema nothing is estimated.
func TestCostEstimate(t *testing.T) {
	five := nestedAll(5)
	for _, tc := range []struct {
		name       string
		constraint string
		claimName  string
		schema     bool
		wantField  string // "" when valid
	}{
		{"one all over a map", "trigger.data.all(k, k.startsWith('app-'))", "", true, ""},
		{"one all over a map's values", "trigger.data.all(k, trigger.data[k].size() < 1024)", "", true, ""},
		{"one exists over a list", "trigger.metadata.finalizers.exists(f, f == 'x')", "", true, ""},
		{"one map over labels in a template", "", "cm-{{ string(trigger.metadata.labels.map(k, k).size()) }}", true, ""},
		{"user groups", "user.groups.exists(g, g == 'admins')", "", true, ""},
		{"a number as text in a template", "", "cm-{{ string(trigger.data.size()) + '-x' }}", true, ""},
		{"plain fields", "trigger.metadata.name.startsWith('a') && !trigger.immutable", "{{ trigger.metadata.name }}", true, ""},
		{"an expression that does not type-check is not estimated", "trigger.metadata.name == 1", "", true, ""},
		{"two nested all", nestedAll(2), "", true, "spec.trigger.constraints[0].expression"},
		{"five nested all", five, "", true, "spec.trigger.constraints[0].expression"},
		{"five nested all in a template", "", "cm-{{ " + five + " }}", true, "spec.target.resourceClaimTemplate.metadata.name"},
		{"five nested all without a schema", five, "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Options
			if tc.schema {
				o.TriggerSchema = configMapSchema()
			}
			_, err := Compile(configMapPolicy(tc.constraint, tc.claimName), o)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a policy error", err)
			}
			if pe.Cause != CauseCostTooHigh || pe.Field != tc.wantField {
				t.Errorf("got %s at %s (%v), want %s at %s", pe.Cause, pe.Field, err, CauseCostTooHigh, tc.wantField)
			}
			if msg := pe.Error(); !strings.Contains(msg, "estimated cost") || !strings.Contains(msg, fmt.Sprint(EstimatedCostLimit)) {
				t.Errorf("message %q does not give the estimate and the limit", msg)
			}
		})
	}
}

// TestGrantCostEstimate: a GrantCreationPolicy is estimated the same way.
func TestGrantCostEstimate(t *testing.T) {
	p := grantPolicy(nestedAll(5), quotav1alpha1.TemplateMetadata{})
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	// The template reads trigger.spec.type: a ConfigMap with a spec.
	s := configMapSchema()
	s.Properties["spec"] = spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{"type": *spec.StringProperty()}}}
	_, err := CompileGrant(p, Options{TriggerSchema: s})
	var pe *Error
	if !errors.As(err, &pe) || pe.Cause != CauseCostTooHigh || pe.Field != "spec.trigger.constraints[0].expression" {
		t.Fatalf("got %v, want %s at the constraint", err, CauseCostTooHigh)
	}
	p.Spec.Trigger.Constraints[0].Expression = "trigger.data.all(k, k != '')"
	if _, err := CompileGrant(p, Options{TriggerSchema: s}); err != nil {
		t.Fatalf("one all(): %v", err)
	}
}

// TestRuntimeCostLimit: what is not estimated is still stopped at
// evaluation, with an error.
func TestRuntimeCostLimit(t *testing.T) {
	c, err := Compile(configMapPolicy(nestedAll(5), ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{}
	for i := range 40 {
		data[fmt.Sprint("k", i)] = "v"
	}
	start := time.Now()
	_, err = c.Applies(Input{Object: map[string]any{"data": data}})
	if err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("got %v, want the cost limit exceeded", err)
	}
	t.Logf("stopped after %v: %v", time.Since(start), err)
}

// BenchmarkCompile is what judging a policy costs, without and with a
// schema to estimate on (a new typed environment per policy).
func BenchmarkCompile(b *testing.B) {
	p := configMapPolicy("trigger.data.all(k, k.startsWith('app-'))", "cm-{{ trigger.metadata.name }}")
	for _, bc := range []struct {
		name string
		o    Options
	}{{"dynamic", Options{}}, {"typed", Options{TriggerSchema: configMapSchema()}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(p, bc.o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
