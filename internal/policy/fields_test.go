package policy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kube-openapi/pkg/validation/spec"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// machineSchema is a CRD's schema: spec closed, status open, metadata
// reached through allOf as resolved references are.
func machineSchema(specFields ...string) *spec.Schema {
	props := map[string]spec.Schema{}
	for _, f := range specFields {
		props[f] = *spec.Int64Property()
	}
	props["tags"] = *spec.MapProperty(spec.StringProperty())
	props["disks"] = *spec.ArrayProperty(&spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"},
		Properties: map[string]spec.Schema{"sizeGiB": *spec.Int64Property()}}})
	open := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	open.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	meta := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"name": *spec.StringProperty(), "labels": *spec.MapProperty(spec.StringProperty())}}}
	return &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{
		"apiVersion": *spec.StringProperty(),
		"kind":       *spec.StringProperty(),
		"metadata":   {SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{meta}}},
		"spec":       {SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: props}},
		"status":     open,
		// A quantity: no type, any value.
		"size": {},
	}}}
}

func typedMachinePolicy(constraint, amount string) *quotav1alpha1.ClaimCreationPolicy {
	p := &quotav1alpha1.ClaimCreationPolicy{}
	p.Name = "machines"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "compute.example.com/v1", Kind: "Machine"}
	if constraint != "" {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: constraint}}
	}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "{{ trigger.metadata.labels['project'] }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "compute.example.com/cpus", Amount: intstr.FromString(amount)}},
	}
	return p
}

// TestUnknownFields: an expression reading a field the trigger kind does
// not have compiles (the reference accepts it: its `trigger` is untyped)
// with a Warning naming the policy's field path, the expression and the
// nearest field, as Kubernetes' type checking reports; open parts of the
// schema, maps, lists and fields of other served versions give none.
func TestUnknownFields(t *testing.T) {
	v1 := machineSchema("cpus", "memoryGiB")
	v2 := machineSchema("cpus", "memoryGiB", "gpus")
	for _, tc := range []struct {
		name, constraint, amount string
		schemas                  []*spec.Schema
		field, want              string
	}{
		{name: "known", amount: "{{ trigger.spec.cpus }}", schemas: []*spec.Schema{v1}},
		{name: "misspelt in a template", amount: "{{ trigger.spec.cpuz }}", schemas: []*spec.Schema{v1},
			field: "spec.target.resourceClaimTemplate.spec.requests[0].amount", want: "reads trigger.spec.cpuz, a field Machine does not have in any version it serves; trigger.spec has cpus, disks, memoryGiB, tags (did you mean cpus?)"},
		{name: "misspelt in a constraint", constraint: "trigger.spec.memoryGB > 2", amount: "1", schemas: []*spec.Schema{v1},
			field: "spec.trigger.constraints[0].expression", want: `"trigger.spec.memoryGB > 2" reads trigger.spec.memoryGB`},
		{name: "misspelt under has()", constraint: "has(trigger.spec.gpu)", amount: "1", schemas: []*spec.Schema{v1, v2},
			field: "spec.trigger.constraints[0].expression", want: "(did you mean gpus?)"},
		{name: "a top-level typo", amount: "{{ trigger.spek.cpus }}", schemas: []*spec.Schema{v1},
			field: "spec.target.resourceClaimTemplate.spec.requests[0].amount", want: "reads trigger.spek, a field Machine does not have"},
		{name: "in a list's items", constraint: "trigger.spec.disks[0].sizeGB > 1", amount: "1", schemas: []*spec.Schema{v1},
			field: "spec.trigger.constraints[0].expression", want: "reads trigger.spec.disks[*].sizeGB"},
		{name: "in one served version", constraint: "has(trigger.spec.gpus)", amount: "1", schemas: []*spec.Schema{v1, v2}},
		{name: "metadata through allOf", constraint: "trigger.metadata.labels['a'] == 'b' && trigger.metadata.name != ''", amount: "1", schemas: []*spec.Schema{v1}},
		{name: "a misspelt metadata field", constraint: "trigger.metadata.lables['a'] == 'b'", amount: "1", schemas: []*spec.Schema{v1},
			field: "spec.trigger.constraints[0].expression", want: "(did you mean labels?)"},
		{name: "a map's keys", constraint: "trigger.spec.tags.anything == 'x'", amount: "1", schemas: []*spec.Schema{v1}},
		{name: "an open object", constraint: "trigger.status.whatever.deeper == 1", amount: "1", schemas: []*spec.Schema{v1}},
		{name: "an untyped field", constraint: "trigger.size.x == 1", amount: "1", schemas: []*spec.Schema{v1}},
		{name: "no schema", amount: "{{ trigger.spec.cpuz }}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(typedMachinePolicy(tc.constraint, tc.amount), Options{ServedSchemas: tc.schemas})
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want == "" {
				if len(c.Warnings) != 0 {
					t.Fatalf("warnings %+v; want none", c.Warnings)
				}
				return
			}
			if len(c.Warnings) != 1 || c.Warnings[0].Field != tc.field || !strings.Contains(c.Warnings[0].Message, tc.want) {
				t.Fatalf("warnings %+v; want one at %s saying %q", c.Warnings, tc.field, tc.want)
			}
		})
	}
}
