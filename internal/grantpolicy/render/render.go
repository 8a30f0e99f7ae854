package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/policy"
)

// Grant is the grant one policy wants for one trigger object.
type Grant struct {
	Name, GenerateName, Namespace string
	Labels, Annotations           map[string]string
	Spec                          quotav1alpha1.ResourceGrantSpec
}

// ForTrigger evaluates the policy named policyName, compiled, whose trigger
// kind is gvk, on the trigger object: nil when the constraints do not
// hold, or the error that stopped it. A template without a namespace puts
// the grant in the trigger's namespace, or in systemNamespace for a
// cluster-scoped trigger.
func ForTrigger(policyName string, gvk schema.GroupVersionKind, compiled *policy.CompiledGrant, systemNamespace string, trigger *unstructured.Unstructured) (*Grant, error) {
	namespace, name := trigger.GetNamespace(), trigger.GetName()
	if gvk.GroupKind() == quotav1alpha1.SchemeGroupVersion.WithKind("ResourceGrant").GroupKind() && trigger.GetLabels()[quotav1alpha1.GrantPolicyLabel] != "" {
		// A grant made by a policy never triggers one: a policy on
		// ResourceGrants would otherwise feed on its own grants.
		return nil, nil
	}
	ok, err := compiled.Applies(trigger.Object)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	r, err := compiled.Render(trigger.Object)
	if err != nil {
		return nil, err
	}
	want := &Grant{Name: r.Name, GenerateName: r.GenerateName, Namespace: r.Namespace, Spec: r.Spec}
	if want.Namespace == "" {
		// No namespace in the template: the trigger's own, or the system
		// namespace for a cluster-scoped trigger.
		want.Namespace = namespace
		if want.Namespace == "" {
			want.Namespace = systemNamespace
		}
	}
	if want.Name == "" && want.GenerateName == "" {
		want.Name = DefaultName(policyName, namespace, name)
	}
	if msgs := validation.IsDNS1123Label(want.Namespace); len(msgs) > 0 {
		return nil, fmt.Errorf("metadata.namespace rendered %q, not a namespace name: %s", want.Namespace, strings.Join(msgs, "; "))
	}
	if want.Name != "" {
		if msgs := validation.IsDNS1123Subdomain(want.Name); len(msgs) > 0 {
			return nil, fmt.Errorf("metadata.name rendered %q, not a valid name: %s", want.Name, strings.Join(msgs, "; "))
		}
		want.GenerateName = ""
	}
	want.Labels = merge(r.Labels, OwnLabels(policyName, gvk.Kind, namespace, name))
	want.Annotations = merge(r.Annotations, OwnAnnotations(policyName, namespace, name, string(trigger.GetUID())))
	return want, nil
}

// DefaultName names the grant of a template without a name: the policy's
// name and a hash of the object's, stable across restarts so that a create
// is refused rather than doubled.
func DefaultName(policy, namespace, name string) string {
	sum := sha256.Sum256([]byte(policy + "\x00" + namespace + "\x00" + name))
	prefix := policy
	if len(prefix) > 200 {
		prefix = strings.TrimRight(prefix[:200], "-.")
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:10]
}

// Pick splits the existing grants into the one matching where the
// template puts the grant (the oldest, for a generated name) and the rest.
func Pick(existing []*quotav1alpha1.ResourceGrant, want *Grant) (keep *quotav1alpha1.ResourceGrant, stale []*quotav1alpha1.ResourceGrant) {
	for _, g := range existing {
		match := g.Namespace == want.Namespace && g.DeletionTimestamp == nil
		if want.Name != "" {
			match = match && g.Name == want.Name
		} else {
			match = match && strings.HasPrefix(g.Name, want.GenerateName)
		}
		if match && keep == nil {
			keep = g
			continue
		}
		stale = append(stale, g)
	}
	return keep, stale
}

func merge(rendered, own map[string]string) map[string]string {
	out := make(map[string]string, len(rendered)+len(own))
	for k, v := range rendered {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}
