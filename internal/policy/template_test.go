package policy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// projectPolicy charges an organization for each Project, with md as the
// claim's metadata.
func projectPolicy(md quotav1alpha1.TemplateMetadata) *quotav1alpha1.ClaimCreationPolicy {
	p := &quotav1alpha1.ClaimCreationPolicy{}
	p.Name = "projects"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Project"}
	p.Spec.Target.ResourceClaimTemplate.Metadata = md
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "{{ .trigger.spec.ownerRef.name }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "resourcemanager.miloapis.com/projects", Amount: intstr.FromInt(1)}},
	}
	return p
}

// grantPolicy gives each Organization 3 projects, with md as the grant's
// metadata.
func grantPolicy(constraint string, md quotav1alpha1.TemplateMetadata) *quotav1alpha1.GrantCreationPolicy {
	p := &quotav1alpha1.GrantCreationPolicy{}
	p.Name = "organization-projects"
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "resourcemanager.miloapis.com/v1alpha1", Kind: "Organization"}
	if constraint != "" {
		p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: constraint}}
	}
	p.Spec.Target.ResourceGrantTemplate.Metadata = md
	p.Spec.Target.ResourceGrantTemplate.Spec = quotav1alpha1.ResourceGrantTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "{{ trigger.metadata.name }}"},
		Allowances: []quotav1alpha1.GrantTemplateAllowance{{ResourceType: "resourcemanager.miloapis.com/projects",
			Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: 3, Dimensions: []quotav1alpha1.TemplateDimension{{Key: "tier", Value: "{{ trigger.spec.type.lowerAscii() }}"}}}}}},
	}
	return p
}

var (
	project = map[string]any{
		"apiVersion": "resourcemanager.miloapis.com/v1alpha1", "kind": "Project",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"tier": "gold"}},
		"spec":     map[string]any{"ownerRef": map[string]any{"kind": "Organization", "name": "acme"}},
	}
	alice   = map[string]any{"name": "alice", "uid": "u-1", "groups": []string{"devs"}, "extra": map[string]any{}}
	reqInfo = map[string]any{"verb": "create", "namespace": "", "name": "web", "apiGroup": "resourcemanager.miloapis.com", "apiVersion": "v1alpha1",
		"resource": "projects", "subresource": "", "dryRun": false}
	organization = map[string]any{
		"apiVersion": "resourcemanager.miloapis.com/v1alpha1", "kind": "Organization",
		"metadata": map[string]any{"name": "acme", "labels": map[string]any{"plan": "pro"}},
		"spec":     map[string]any{"type": "Standard"},
	}
)

// TestClaimTemplateRendersMetadata: every metadata field of a claim
// template is rendered, from trigger, user and requestInfo, with or without
// the leading dot.
func TestClaimTemplateRendersMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   quotav1alpha1.TemplateMetadata
		want Rendered
	}{
		{"literal", quotav1alpha1.TemplateMetadata{Name: "project-web", Namespace: "organization-acme",
			Labels: map[string]string{"app": "quota"}, Annotations: map[string]string{"note": "Any text, even {braces}"}},
			Rendered{Name: "project-web", Namespace: "organization-acme", Labels: map[string]string{"app": "quota"}, Annotations: map[string]string{"note": "Any text, even {braces}"}}},
		{"name from trigger", quotav1alpha1.TemplateMetadata{Name: "project-{{ trigger.metadata.name }}"}, Rendered{Name: "project-web"}},
		{"generateName from trigger, leading dot", quotav1alpha1.TemplateMetadata{GenerateName: "{{ .trigger.metadata.name }}-"}, Rendered{GenerateName: "web-"}},
		{"namespace from trigger", quotav1alpha1.TemplateMetadata{Namespace: "organization-{{trigger.spec.ownerRef.name}}"}, Rendered{Namespace: "organization-acme"}},
		{"namespace from requestInfo", quotav1alpha1.TemplateMetadata{Namespace: "{{ requestInfo.resource }}-claims"}, Rendered{Namespace: "projects-claims"}},
		{"name from user", quotav1alpha1.TemplateMetadata{Name: "{{ user.name }}-{{ trigger.metadata.name }}"}, Rendered{Name: "alice-web"}},
		{"labels: keys and values", quotav1alpha1.TemplateMetadata{Labels: map[string]string{
			"created-by": "{{user.name}}", "tier": "{{ .trigger.metadata.labels['tier'] }}", "{{ requestInfo.verb }}": "{{ requestInfo.resource }}"}},
			Rendered{Labels: map[string]string{"created-by": "alice", "tier": "gold", "create": "projects"}}},
		{"annotations", quotav1alpha1.TemplateMetadata{Annotations: map[string]string{
			"quota.example.com/requested-by": "{{ user.name }} in {{ user.groups[0] }}", "quota.example.com/{{ trigger.kind.lowerAscii() }}": "{{ trigger.spec.ownerRef.kind }}/{{ trigger.spec.ownerRef.name }}"}},
			Rendered{Annotations: map[string]string{"quota.example.com/requested-by": "alice in devs", "quota.example.com/project": "Organization/acme"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compile(projectPolicy(tc.md), Options{})
			if err != nil {
				t.Fatal(err)
			}
			ok, got, err := c.Evaluate(Input{Object: project, User: alice, RequestInfo: reqInfo})
			if err != nil || !ok {
				t.Fatalf("ok=%v err=%v", ok, err)
			}
			tc.want.Spec = quotav1alpha1.ResourceClaimSpec{
				ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
				Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "resourcemanager.miloapis.com/projects", Amount: 1}},
			}
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestGrantTemplateRenders: a grant template renders its metadata, its
// consumer and its dimensions from trigger; its constraints decide whether
// it applies.
func TestGrantTemplateRenders(t *testing.T) {
	c, err := CompileGrant(grantPolicy("trigger.spec.type == 'Standard'", quotav1alpha1.TemplateMetadata{
		Name: "{{ .trigger.metadata.name }}-projects", Namespace: "organization-{{ trigger.metadata.name }}",
		Labels:      map[string]string{"plan": "{{ trigger.metadata.labels.plan }}", "{{ trigger.kind.lowerAscii() }}": "{{ trigger.metadata.name }}"},
		Annotations: map[string]string{"quota.example.com/source": "{{ trigger.apiVersion }} {{ trigger.kind }}"},
	}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"resourcemanager.miloapis.com/projects"}, c.LiteralResourceTypes); diff != "" {
		t.Errorf("LiteralResourceTypes (-want +got):\n%s", diff)
	}
	if ok, err := c.Applies(organization); !ok || err != nil {
		t.Fatalf("Applies: ok=%v err=%v", ok, err)
	}
	got, err := c.Render(organization)
	if err != nil {
		t.Fatal(err)
	}
	want := &RenderedGrant{
		Name: "acme-projects", Namespace: "organization-acme",
		Labels:      map[string]string{"plan": "pro", "organization": "acme"},
		Annotations: map[string]string{"quota.example.com/source": "resourcemanager.miloapis.com/v1alpha1 Organization"},
		Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Allowances: []quotav1alpha1.Allowance{{ResourceType: "resourcemanager.miloapis.com/projects",
				Buckets: []quotav1alpha1.GrantBucket{{Amount: 3, Dimensions: []quotav1alpha1.Dimension{{Key: "tier", Value: "standard"}}}}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	personal := map[string]any{"metadata": map[string]any{"name": "bob"}, "spec": map[string]any{"type": "Personal"}}
	if ok, err := c.Applies(personal); ok || err != nil {
		t.Errorf("a Personal organization: ok=%v err=%v, want false", ok, err)
	}
}

// TestTemplateRefused: each invalid literal and each broken template is
// refused when the policy is compiled, naming its exact field.
func TestTemplateRefused(t *testing.T) {
	claimMD := func(md quotav1alpha1.TemplateMetadata) func() error {
		return func() error { _, err := Compile(projectPolicy(md), Options{}); return err }
	}
	grantMD := func(md quotav1alpha1.TemplateMetadata) func() error {
		return func() error { _, err := CompileGrant(grantPolicy("", md), Options{}); return err }
	}
	grantWith := func(edit func(*quotav1alpha1.GrantCreationPolicy)) func() error {
		return func() error {
			p := grantPolicy("", quotav1alpha1.TemplateMetadata{})
			edit(p)
			_, err := CompileGrant(p, Options{})
			return err
		}
	}
	const claim, grant = "spec.target.resourceClaimTemplate.", "spec.target.resourceGrantTemplate."
	for _, tc := range []struct {
		name    string
		compile func() error
		cause   string
		field   string
	}{
		{"claim name not a DNS subdomain", claimMD(quotav1alpha1.TemplateMetadata{Name: "INVALID_NAME"}), CauseInvalidLiteral, claim + "metadata.name"},
		{"claim name too long", claimMD(quotav1alpha1.TemplateMetadata{Name: string(make([]byte, 254))}), CauseInvalidLiteral, claim + "metadata.name"},
		{"claim generateName not a prefix", claimMD(quotav1alpha1.TemplateMetadata{GenerateName: "Project_"}), CauseInvalidLiteral, claim + "metadata.generateName"},
		{"claim name and generateName", claimMD(quotav1alpha1.TemplateMetadata{Name: "a", GenerateName: "b-"}), CauseInvalidLiteral, claim + "metadata.generateName"},
		{"claim namespace not a DNS label", claimMD(quotav1alpha1.TemplateMetadata{Namespace: "org.acme"}), CauseInvalidLiteral, claim + "metadata.namespace"},
		{"claim templated name with an upper-case literal", claimMD(quotav1alpha1.TemplateMetadata{Name: "Project-{{ trigger.metadata.name }}"}), CauseInvalidLiteral, claim + "metadata.name"},
		{"claim templated namespace with a dot", claimMD(quotav1alpha1.TemplateMetadata{Namespace: "org.{{ trigger.spec.ownerRef.name }}"}), CauseInvalidLiteral, claim + "metadata.namespace"},
		{"claim label key", claimMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"bad key!": "x"}}), CauseInvalidLiteral, claim + "metadata.labels[bad key!]"},
		{"claim label value", claimMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"app": "not a value"}}), CauseInvalidLiteral, claim + "metadata.labels[app]"},
		{"claim annotation key", claimMD(quotav1alpha1.TemplateMetadata{Annotations: map[string]string{"a/b/c": "x"}}), CauseInvalidLiteral, claim + "metadata.annotations[a/b/c]"},
		{"claim unclosed {{", claimMD(quotav1alpha1.TemplateMetadata{Name: "p-{{ trigger.metadata.name"}), CauseTemplateInvalid, claim + "metadata.name"},
		// A stray "}}" is literal text, as in the reference implementation,
		// which no name may hold.
		{"claim }} without {{", claimMD(quotav1alpha1.TemplateMetadata{GenerateName: "p-trigger.metadata.name }}"}), CauseInvalidLiteral, claim + "metadata.generateName"},
		{"claim }} before {{", claimMD(quotav1alpha1.TemplateMetadata{Namespace: "}}{{ trigger.metadata.name }}"}), CauseInvalidLiteral, claim + "metadata.namespace"},
		{"claim nested {{", claimMD(quotav1alpha1.TemplateMetadata{Name: "{{ {{ trigger.metadata.name }} }}"}), CauseTemplateInvalid, claim + "metadata.name"},
		// An empty {{ }} is dropped, as in the reference; the text as
		// written is no label value.
		{"claim empty {{ }}", claimMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"app": "{{ }}"}}), CauseInvalidLiteral, claim + "metadata.labels[app]"},
		{"claim label value does not compile", claimMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"app": "{{ trigger.metadata. }}"}}), CauseTemplateInvalid, claim + "metadata.labels[app]"},
		{"claim annotation value does not compile", claimMD(quotav1alpha1.TemplateMetadata{Annotations: map[string]string{"note": "{{ usr.name }}"}}), CauseTemplateInvalid, claim + "metadata.annotations[note]"},
		{"claim label key does not compile", claimMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"{{ 1 + }}": "x"}}), CauseTemplateInvalid, claim + "metadata.labels[{{ 1 + }}]"},
		{"claim dimension key does not compile", func() error {
			p := projectPolicy(quotav1alpha1.TemplateMetadata{})
			p.Spec.Target.ResourceClaimTemplate.Spec.Requests[0].Dimensions = []quotav1alpha1.TemplateDimension{{Key: "{{ x", Value: "v"}}
			_, err := Compile(p, Options{})
			return err
		}, CauseTemplateInvalid, claim + "spec.requests[0].dimensions[0].key"},
		{"grant name not a DNS subdomain", grantMD(quotav1alpha1.TemplateMetadata{Name: "INVALID_NAME"}), CauseInvalidLiteral, grant + "metadata.name"},
		{"grant generateName not a prefix", grantMD(quotav1alpha1.TemplateMetadata{GenerateName: "-x-"}), CauseInvalidLiteral, grant + "metadata.generateName"},
		{"grant name and generateName", grantMD(quotav1alpha1.TemplateMetadata{Name: "{{ trigger.metadata.name }}", GenerateName: "b-"}), CauseInvalidLiteral, grant + "metadata.generateName"},
		{"grant namespace not a DNS label", grantMD(quotav1alpha1.TemplateMetadata{Namespace: "Organization-Acme"}), CauseInvalidLiteral, grant + "metadata.namespace"},
		{"grant label value", grantMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"plan": "-pro"}}), CauseInvalidLiteral, grant + "metadata.labels[plan]"},
		{"grant unclosed {{", grantMD(quotav1alpha1.TemplateMetadata{Namespace: "organization-{{ trigger.metadata.name"}), CauseTemplateInvalid, grant + "metadata.namespace"},
		{"grant name reads user", grantMD(quotav1alpha1.TemplateMetadata{Name: "{{ user.name }}"}), CauseReadsRequest, grant + "metadata.name"},
		{"grant label reads requestInfo", grantMD(quotav1alpha1.TemplateMetadata{Labels: map[string]string{"verb": "{{ requestInfo.verb }}"}}), CauseReadsRequest, grant + "metadata.labels[verb]"},
		{"grant constraint reads user", func() error {
			_, err := CompileGrant(grantPolicy("user.name == 'alice'", quotav1alpha1.TemplateMetadata{}), Options{})
			return err
		},
			CauseReadsRequest, "spec.trigger.constraints[0].expression"},
		{"grant constraint does not compile", func() error {
			_, err := CompileGrant(grantPolicy("trigger.spec.(", quotav1alpha1.TemplateMetadata{}), Options{})
			return err
		},
			CauseConstraintInvalid, "spec.trigger.constraints[0].expression"},
		{"grant constraint not bool", func() error {
			_, err := CompileGrant(grantPolicy("trigger.metadata.name", quotav1alpha1.TemplateMetadata{}), Options{TriggerSchema: configMapSchema()})
			return err
		},
			CauseConstraintNotBool, "spec.trigger.constraints[0].expression"},
		{"grant consumer name", grantWith(func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef.Name = "{{ trigger.metadata.name "
		}), CauseTemplateInvalid, grant + "spec.consumerRef.name"},
		{"grant dimension value", grantWith(func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Dimensions[0].Value = "{{ requestInfo.namespace }}"
		}), CauseReadsRequest, grant + "spec.allowances[0].buckets[0].dimensions[0].value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.compile()
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("got %v, want a policy error", err)
			}
			if pe.Reason != ReasonValidationFailed || pe.Cause != tc.cause || pe.Field != tc.field {
				t.Errorf("got %s (%s) at %s, want %s (%s) at %s: %v", pe.Reason, pe.Cause, pe.Field, ReasonValidationFailed, tc.cause, tc.field, err)
			}
			t.Log(err)
		})
	}
}
