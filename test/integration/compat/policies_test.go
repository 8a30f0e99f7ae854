package compat

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestInvalidPoliciesRefusedAtCreate: every policy the reference refuses at
// create is refused here too, 422 on the exact field, and nothing is
// stored; a policy that can only be judged later (its trigger kind is not
// served yet) is stored and Ready=False; an update that breaks a stored
// policy is refused, and one that does not touch its spec is not.
func TestInvalidPoliciesRefusedAtCreate(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	ctx := context.Background()
	claimPolicy := func(name string, edit func(*quotav1alpha1.ClaimCreationPolicy)) *quotav1alpha1.ClaimCreationPolicy {
		p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
		p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
			ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
			Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: "example.com/maps", Amount: intstr.FromInt32(1)}},
		}
		edit(p)
		return p
	}
	grantPolicy := func(name string, edit func(*quotav1alpha1.GrantCreationPolicy)) *quotav1alpha1.GrantCreationPolicy {
		p := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
		t := &p.Spec.Target.ResourceGrantTemplate
		t.Metadata.Name = "{{ trigger.metadata.name }}"
		t.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"}
		t.Spec.Allowances = []quotav1alpha1.GrantTemplateAllowance{{ResourceType: "example.com/maps", Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: 1}}}}
		edit(p)
		return p
	}
	md := func(p *quotav1alpha1.ClaimCreationPolicy) *quotav1alpha1.TemplateMetadata {
		return &p.Spec.Target.ResourceClaimTemplate.Metadata
	}
	const tmpl = "spec.target.resourceClaimTemplate."
	for _, tc := range []struct {
		name   string
		obj    client.Object
		field  string
		saying string
	}{
		{"name and generateName", claimPolicy("bad-both", func(p *quotav1alpha1.ClaimCreationPolicy) {
			md(p).Name, md(p).GenerateName = "a", "b-"
		}), tmpl + "metadata.generateName", "mutually exclusive"},
		{"literal name not a DNS name", claimPolicy("bad-name", func(p *quotav1alpha1.ClaimCreationPolicy) { md(p).Name = "Not_A_Name" }), tmpl + "metadata.name", "is not a valid name"},
		{"literal namespace not a DNS label", claimPolicy("bad-ns", func(p *quotav1alpha1.ClaimCreationPolicy) { md(p).Namespace = "Bad.NS" }), tmpl + "metadata.namespace", "is not a valid namespace"},
		{"generateName without '-'", claimPolicy("bad-gen", func(p *quotav1alpha1.ClaimCreationPolicy) { md(p).GenerateName = "claim" }), tmpl + "metadata.generateName", "generateName must end with '-'"},
		{"bad CEL in metadata", claimPolicy("bad-cel", func(p *quotav1alpha1.ClaimCreationPolicy) { md(p).Name = "{{ trigger.metadata. }}" }), tmpl + "metadata.name", "Syntax error"},
		{"segment not a string", claimPolicy("bad-int", func(p *quotav1alpha1.ClaimCreationPolicy) { md(p).Name = "c-{{ 1 + 1 }}" }), tmpl + "metadata.name", "must return a string"},
		{"empty consumer name", claimPolicy("bad-consumer", func(p *quotav1alpha1.ClaimCreationPolicy) {
			p.Spec.Target.ResourceClaimTemplate.Spec.ConsumerRef.Name = " "
		}), tmpl + "spec.consumerRef.name", "value cannot be empty"},
		{"constraint not a bool", claimPolicy("bad-constraint", func(p *quotav1alpha1.ClaimCreationPolicy) {
			p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: "trigger.metadata.name"}}
		}), "spec.trigger.constraints[0].expression", "must return bool"},
		{"grant: empty consumer name", grantPolicy("bad-grant-consumer", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef.Name = "  "
		}), "spec.target.resourceGrantTemplate.spec.consumerRef.name", "value cannot be empty"},
		{"grant: blank name", grantPolicy("bad-grant-name", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Target.ResourceGrantTemplate.Metadata.Name = " "
		}), "spec.target.resourceGrantTemplate.metadata.name", "value cannot be empty"},
		{"grant: constraint not a bool", grantPolicy("bad-grant-constraint", func(p *quotav1alpha1.GrantCreationPolicy) {
			p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: "1"}}
		}), "spec.trigger.constraints[0].expression", "must return bool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Create(ctx, tc.obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want 422 Invalid, got %v", err)
			}
			mustContain(t, err, tc.field+": Invalid value", tc.saying)
			if err := c.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.obj); !apierrors.IsNotFound(err) {
				t.Fatalf("the refused policy was stored: %v", err)
			}
		})
	}

	// Judged later: a trigger kind not served yet is stored, Ready=False.
	later := claimPolicy("later-kind", func(p *quotav1alpha1.ClaimCreationPolicy) {
		p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "later.example.com/v1", Kind: "Widget"}
	})
	if err := c.Create(ctx, later); err != nil {
		t.Fatalf("a policy whose trigger kind is not served yet: %v", err)
	}
	f := quotatest.NewFixture(t, c)
	f.WaitCondition(later, quotav1alpha1.PolicyConditionReady, metav1.ConditionFalse)

	// An update that breaks the spec is refused; one of the metadata alone
	// is not.
	later.Spec.Target.ResourceClaimTemplate.Metadata.GenerateName = "no-dash"
	mustContain(t, c.Update(ctx, later), "generateName must end with '-'")
	if err := c.Get(ctx, client.ObjectKeyFromObject(later), later); err != nil {
		t.Fatal(err)
	}
	later.Labels = map[string]string{"team": "a"}
	if err := c.Update(ctx, later); err != nil && !strings.Contains(err.Error(), "modified") {
		t.Fatalf("a metadata-only update: %v", err)
	}
}
