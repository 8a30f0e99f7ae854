package policycheck

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/warning"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/policy"
	"github.com/quotaplane/quotaplane/internal/policy/triggerschema"
)

// warn tells the client, as warnings (kubectl prints them), what checking a
// valid policy against its trigger kind's schema finds: a trigger kind that
// is not served, or a field no version of it declares. As Kubernetes'
// ValidatingAdmissionPolicy, nothing is refused for it; the engine writes
// the same findings into the policy's status.typeChecking. compile compiles
// the policy with a schema.
func (p *plugin) warn(ctx context.Context, tr quotav1alpha1.TriggerResource, compile func(policy.Options) ([]policy.Warning, error)) {
	if p.kube == nil {
		return
	}
	gv, err := schema.ParseGroupVersion(tr.APIVersion)
	if err != nil {
		return
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: tr.Kind}
	ok, hint, err := kinds.Kind(p.kube.Discovery(), gk)
	if err != nil {
		return
	}
	if !ok {
		warning.AddWarning(ctx, "", fmt.Sprintf("spec.trigger.resource.kind: %s", policy.KindNotServedWarning(tr, hint)))
		return
	}
	p.once.Do(func() { p.schemas = triggerschema.New(p.kube.Discovery(), 0) })
	s, err := p.schemas.Resolve(tr.APIVersion, tr.Kind)
	if err != nil {
		return
	}
	warnings, err := compile(policy.Options{TriggerSchema: s})
	if err != nil {
		return // the engine judges it against every served version
	}
	for _, w := range warnings {
		warning.AddWarning(ctx, "", fmt.Sprintf("%s: %s", w.Field, w.Message))
	}
}
