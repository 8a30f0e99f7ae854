package amounts

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaAmounts"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update), DynamicClient: plugininit.NewDynamicClient(PluginName)}, nil
	})
}

type plugin struct {
	*admission.Handler
	plugininit.DynamicClient
}

var (
	_ admission.MutationInterface       = &plugin{}
	_ initializer.WantsDynamicClient    = &plugin{}
	_ admission.InitializationValidator = &plugin{}

	registrations = quotav1alpha1.SchemeGroupVersion.WithResource("resourceregistrations")
)

// kinds are where amounts are, per resource: the nested lists leading to
// the objects holding amount (an item's resourceType applies to the lists
// nested in it: a grant's buckets are in its allowances), and the least
// amount allowed.
var kinds = map[schema.GroupResource]struct {
	kind  string
	lists [][]string
	min   int64
}{
	quotav1alpha1.Resource("resourcegrants"):        {kind: "ResourceGrant", lists: [][]string{{"spec", "allowances"}, {"buckets"}}, min: 0},
	quotav1alpha1.Resource("resourceclaims"):        {kind: "ResourceClaim", lists: [][]string{{"spec", "requests"}}, min: 1},
	quotav1alpha1.Resource("grantcreationpolicies"): {kind: "GrantCreationPolicy", lists: [][]string{{"spec", "target", "resourceGrantTemplate", "spec", "allowances"}, {"buckets"}}, min: 0},
}

// Admit converts quantity amounts to integers in base units.
func (p *plugin) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	k, ok := kinds[a.GetResource().GroupResource()]
	if !ok || a.GetSubresource() != "" {
		return nil
	}
	c := &converter{ctx: ctx, p: p, min: k.min}
	switch obj := a.GetObject().(type) {
	case *unstructured.Unstructured: // a CRD's object
		c.walk(obj.Object, k.lists, nil, "")
	default: // a natively served kind
		c.typed(obj)
	}
	if len(c.errs) > 0 {
		return apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind(k.kind).GroupKind(), a.GetName(), c.errs)
	}
	return nil
}

type converter struct {
	ctx   context.Context
	p     *plugin
	min   int64
	units map[string]string // resource type → baseUnitQuantity, read once
	err   error
	errs  field.ErrorList
}

// walk goes down the nested lists of m; at the innermost items it converts
// amount. resourceType is the one of the enclosing item.
func (c *converter) walk(m map[string]any, lists [][]string, at *field.Path, resourceType string) {
	if len(lists) == 0 {
		c.convert(m, at.Child("amount"), resourceType)
		return
	}
	items, found, _ := unstructured.NestedSlice(m, lists[0]...)
	if !found {
		return
	}
	path := at
	for _, f := range lists[0] {
		if path == nil {
			path = field.NewPath(f)
		} else {
			path = path.Child(f)
		}
	}
	for i, it := range items {
		item, ok := it.(map[string]any)
		if !ok {
			continue
		}
		rt := resourceType
		if s, ok := item["resourceType"].(string); ok {
			rt = s
		}
		c.walk(item, lists[1:], path.Index(i), rt)
		items[i] = item
	}
	_ = unstructured.SetNestedSlice(m, items, lists[0]...)
}

// typed converts the quantities a natively served object was written with
// (kept in AmountQuantity by its JSON decoding).
func (c *converter) typed(obj runtime.Object) {
	switch o := obj.(type) {
	case *quotav1alpha1.ResourceClaim:
		at := field.NewPath("spec", "requests")
		for i := range o.Spec.Requests {
			r := &o.Spec.Requests[i]
			c.convertTyped(&r.Amount, &r.AmountQuantity, at.Index(i).Child("amount"), string(r.ResourceType))
		}
	case *quotav1alpha1.ResourceGrant:
		at := field.NewPath("spec", "allowances")
		for i := range o.Spec.Allowances {
			al := &o.Spec.Allowances[i]
			for j := range al.Buckets {
				b := &al.Buckets[j]
				c.convertTyped(&b.Amount, &b.AmountQuantity, at.Index(i).Child("buckets").Index(j).Child("amount"), string(al.ResourceType))
			}
		}
	case *quotav1alpha1.GrantCreationPolicy:
		at := field.NewPath("spec", "target", "resourceGrantTemplate", "spec", "allowances")
		allowances := o.Spec.Target.ResourceGrantTemplate.Spec.Allowances
		for i := range allowances {
			al := &allowances[i]
			for j := range al.Buckets {
				b := &al.Buckets[j]
				c.convertTyped(&b.Amount, &b.AmountQuantity, at.Index(i).Child("buckets").Index(j).Child("amount"), string(al.ResourceType))
			}
		}
	}
}

// convertTyped converts one quantity as convert does.
func (c *converter) convertTyped(amount *int64, quantity *string, path *field.Path, resourceType string) {
	var m map[string]any
	if *quantity == "" {
		m = map[string]any{"amount": *amount} // checked against the least amount, as a CRD's integer is
	} else {
		m = map[string]any{"amount": *quantity}
	}
	c.convert(m, path, resourceType)
	if n, ok := m["amount"].(int64); ok {
		*amount, *quantity = n, ""
	}
}

func (c *converter) convert(m map[string]any, path *field.Path, resourceType string) {
	v, found := m["amount"]
	if !found {
		return // the schema reports it
	}
	var n int64
	switch t := v.(type) {
	case int64:
		n = t
	case float64:
		return // not an integer: the schema refuses it
	case string:
		s := strings.TrimSpace(t)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			n = i
			break
		}
		if strings.Contains(resourceType, "{{") {
			c.errs = append(c.errs, field.Invalid(path, t, fmt.Sprintf(
				"a quantity needs a literal resourceType to be converted to base units, and %q is a template; write the amount as an integer in base units", resourceType)))
			return
		}
		units, err := c.lookup()
		if err != nil {
			c.errs = append(c.errs, field.InternalError(path, fmt.Errorf("reading the registrations to convert %q: %w; retry", t, err)))
			return
		}
		got, err := policy.ParseAmount(s, resourceType, func(rt string) (string, bool) {
			q, ok := units[rt]
			return q, ok && q != ""
		})
		if err != nil {
			if _, registered := units[resourceType]; !registered {
				err = fmt.Errorf("%w (and %s is not registered)", err, resourceType)
			}
			c.errs = append(c.errs, field.Invalid(path, t, err.Error()))
			return
		}
		n = got
	default:
		return
	}
	if n < c.min {
		c.errs = append(c.errs, field.Invalid(path, v, fmt.Sprintf("should be greater than or equal to %d", c.min)))
		return
	}
	m["amount"] = n
}

// lookup reads every registration's baseUnitQuantity, once per request.
func (c *converter) lookup() (map[string]string, error) {
	if c.units != nil || c.err != nil {
		return c.units, c.err
	}
	list, err := c.p.Client().Resource(registrations).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.err = err
		return nil, err
	}
	c.units = map[string]string{}
	for _, r := range list.Items {
		rt, _, _ := unstructured.NestedString(r.Object, "spec", "resourceType")
		q, _, _ := unstructured.NestedString(r.Object, "spec", "baseUnitQuantity")
		c.units[rt] = q
	}
	return c.units, nil
}
