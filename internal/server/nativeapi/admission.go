package nativeapi

import (
	"context"
	"fmt"
	"io"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
)

// PluginName is the admission plugin that keeps CRDs out of the natively
// served groups.
const PluginName = "QuotaNativeGroups"

// RegisterAdmission adds the plugin; it refuses only while the groups are
// served natively (native false: serve --serve-kinds-as-crds installs them).
func RegisterAdmission(plugins *admission.Plugins, native bool) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &nativeGroups{Handler: admission.NewHandler(admission.Create, admission.Update), native: native}, nil
	})
}

type nativeGroups struct {
	*admission.Handler
	native bool
}

var _ admission.ValidationInterface = &nativeGroups{}

// Validate refuses a CustomResourceDefinition of a natively served group: it
// would claim the same API as the native storage and, deleted later, its
// cleanup would delete every object stored at the same keys.
func (p *nativeGroups) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if !p.native || a.GetResource().GroupResource() != apiextensions.Resource("customresourcedefinitions") {
		return nil
	}
	crd, ok := a.GetObject().(*apiextensions.CustomResourceDefinition)
	if !ok {
		return nil
	}
	for _, gv := range GroupVersions {
		if crd.Spec.Group == gv.Group {
			return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf(
				"quotaplane serve serves the %s API itself, so it takes no CustomResourceDefinition of that group; the CRDs of `quotaplane crds` are for clusters that run `quotaplane controller`", gv.Group))
		}
	}
	return nil
}
