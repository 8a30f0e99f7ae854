package policy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// CompiledGrant is a compiled GrantCreationPolicy. Its constraints and
// templates see `trigger` only: it is evaluated on stored objects.
type CompiledGrant struct {
	compiledPolicy
	allowances []grantAllowance
	// parent renders spec.target.parentContext.nameExpression; nil when
	// the policy has no parent context.
	parent *template
	// window is the template's window, relative to the trigger's creation.
	window *quotav1alpha1.GrantTemplateWindow
}

type grantAllowance struct {
	resourceType quotav1alpha1.ResourceType
	buckets      []grantBucket
}

type grantBucket struct {
	amount int64
	dims   []pairTemplate
}

// RenderedGrant is a grant a policy asks for: its metadata and spec,
// rendered.
type RenderedGrant struct {
	Name, GenerateName, Namespace string
	Labels, Annotations           map[string]string
	Spec                          quotav1alpha1.ResourceGrantSpec
}

// CompileGrant compiles a GrantCreationPolicy. The error is an *Error
// naming the field and the cause; an expression that reads `user` or
// `requestInfo` is refused (CauseReadsRequest).
func CompileGrant(p *quotav1alpha1.GrantCreationPolicy, o Options) (*CompiledGrant, error) {
	t := p.Spec.Target.ResourceGrantTemplate
	base := field.NewPath("spec", "target", "resourceGrantTemplate")
	if p.Spec.Trigger.NamespaceSelector != nil {
		return nil, invalid(CauseTriggerInvalid, "spec.trigger.namespaceSelector", fmt.Errorf("a GrantCreationPolicy gives grants to cluster-scoped consumers (Organizations, Projects), which have no namespace; remove it and select with constraints"))
	}
	cp, comp, err := compilePolicy(p.ObjectMeta, p.Spec.Trigger, base, t.Metadata, t.Spec.ConsumerRef, o, true)
	if err != nil {
		return nil, err
	}
	c := &CompiledGrant{compiledPolicy: cp}
	for i, a := range t.Spec.Allowances {
		ga := grantAllowance{resourceType: a.ResourceType}
		c.literalResourceType(string(a.ResourceType), base.Child("spec", "allowances").Index(i).Child("resourceType"))
		for j, b := range a.Buckets {
			path := base.Child("spec", "allowances").Index(i).Child("buckets").Index(j).Child("dimensions")
			gb := grantBucket{amount: b.Amount}
			if gb.dims, err = comp.dimensions(path, b.Dimensions); err != nil {
				return nil, err
			}
			ga.buckets = append(ga.buckets, gb)
		}
		c.allowances = append(c.allowances, ga)
	}
	if w := t.Spec.Window; w != nil {
		if err := checkWindow(w, base.Child("spec", "window")); err != nil {
			return nil, err
		}
		c.window = w.DeepCopy()
	}
	if pc := p.Spec.Target.ParentContext; pc != nil {
		// A CEL expression, as the reference writes it, or a {{ }}
		// template.
		src := pc.NameExpression
		if !strings.Contains(src, "{{") {
			src = "{{ " + src + " }}"
		}
		if c.parent, err = comp.template(field.NewPath("spec", "target", "parentContext", "nameExpression").String(), src); err != nil {
			return nil, err
		}
	}
	c.Warnings = comp.warnings
	return c, nil
}

// ParentName renders the name of the parent context the grant for trigger
// is written into; ok is false when the policy has none.
func (c *CompiledGrant) ParentName(trigger map[string]any) (name string, ok bool, err error) {
	if c.parent == nil {
		return "", false, nil
	}
	name, err = c.parent.render(triggerVars(trigger))
	return name, true, err
}

func triggerVars(trigger map[string]any) map[string]any {
	return map[string]any{"trigger": trigger}
}

// Applies evaluates the constraints: whether the policy gives trigger a
// grant.
func (c *CompiledGrant) Applies(trigger map[string]any) (bool, error) {
	return c.constraints.applies(triggerVars(trigger))
}

// Render renders the grant for trigger (whether the constraints hold is
// Applies's question).
func (c *CompiledGrant) Render(trigger map[string]any) (*RenderedGrant, error) {
	vars := triggerVars(trigger)
	md, err := c.metadata.render(vars)
	if err != nil {
		return nil, err
	}
	out := &RenderedGrant{Name: md.Name, GenerateName: md.GenerateName, Namespace: md.Namespace, Labels: md.Labels, Annotations: md.Annotations}
	if out.Spec.ConsumerRef, err = c.consumer.render(vars); err != nil {
		return nil, err
	}
	for _, a := range c.allowances {
		al := quotav1alpha1.Allowance{ResourceType: a.resourceType}
		for _, b := range a.buckets {
			gb := quotav1alpha1.GrantBucket{Amount: b.amount}
			if gb.Dimensions, err = renderDimensions(b.dims, vars); err != nil {
				return nil, err
			}
			al.Buckets = append(al.Buckets, gb)
		}
		out.Spec.Allowances = append(out.Spec.Allowances, al)
	}
	if c.window != nil {
		if out.Spec.ValidFrom, out.Spec.ExpiresAt, err = renderWindow(c.window, trigger); err != nil {
			return nil, err
		}
	}
	return out, nil
}
