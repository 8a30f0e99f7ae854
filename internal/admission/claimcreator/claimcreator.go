package claimcreator

import (
	"context"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/admission"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// PluginName is the admission plugin's name.
const PluginName = "ClaimCreator"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update)}, nil
	})
}

type plugin struct {
	*admission.Handler
}

var _ admission.MutationInterface = &plugin{}

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
