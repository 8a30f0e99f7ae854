package claimcreator

import (
	"context"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// PluginName is the admission plugin's name.
const PluginName = "ClaimCreator"

// Register adds the plugin to plugins. With the engine's handle (nil when
// serve runs without its engine), a dry-run create of a claim is answered
// with the decision the engine would make now.
func Register(plugins *admission.Plugins, handle *route.Handle) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update), handle: handle}, nil
	})
}

type plugin struct {
	*admission.Handler
	handle *route.Handle
}

var (
	_ admission.MutationInterface   = &plugin{}
	_ admission.ValidationInterface = &plugin{}
)

// Validate answers a dry-run create of a claim with the engine's decision
// on it as things stand, taking nothing: refused (403, the refusal's
// message) when it would not be granted, a warning saying so when it would.
// Owning services ask it through pkg/quotaclaim's Check.
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if p.handle == nil || !a.IsDryRun() || a.GetOperation() != admission.Create || a.GetResource().GroupResource() != claims || a.GetSubresource() != "" || charge.ReviewPass(a) {
		return nil
	}
	c, ok := a.GetObject().(*quotav1alpha1.ResourceClaim)
	if !ok {
		return nil // served as a CRD: no typed claim to evaluate
	}
	return charge.CheckClaim(ctx, p.handle, c)
}

var claims = quotav1alpha1.Resource("resourceclaims")

// Admit writes, or keeps, the creator annotation of a claim.
func (p *plugin) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != claims || a.GetSubresource() != "" {
		return nil
	}
	obj, err := meta.Accessor(a.GetObject())
	if err != nil {
		return nil
	}
	creator := ""
	switch a.GetOperation() {
	case admission.Create:
		if u := a.GetUserInfo(); u != nil {
			creator = u.GetName()
		}
	case admission.Update:
		old, err := meta.Accessor(a.GetOldObject())
		if err != nil {
			return nil
		}
		creator = old.GetAnnotations()[quotav1alpha1.AnnotationCreator]
	}
	annotations := obj.GetAnnotations()
	if creator == "" {
		if _, ok := annotations[quotav1alpha1.AnnotationCreator]; ok {
			delete(annotations, quotav1alpha1.AnnotationCreator)
			obj.SetAnnotations(annotations)
		}
		return nil
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[quotav1alpha1.AnnotationCreator] = creator
	obj.SetAnnotations(annotations)
	return nil
}
