package delegation

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/warning"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

var organizationsGVR = rmv1alpha1.SchemeGroupVersion.WithResource("organizations")

// warnUnknownConsumer warns the platform — it does not refuse: a grant may
// be written before its consumer, by a provisioning pipeline — when a grant
// names an
// Organization, a Project or a Namespace that does not exist, with the
// nearest name that does: "acme-crop" for "acme-corp" would otherwise
// limit nothing, silently.
func (p *plugin) warnUnknownConsumer(ctx context.Context, g *quotav1alpha1.ResourceGrant) {
	ref := g.Spec.ConsumerRef
	if g.Spec.ConsumerSelector != nil || ref.Name == "" {
		return
	}
	var gvr schema.GroupVersionResource
	switch {
	case ref.APIGroup == rmv1alpha1.GroupName && ref.Kind == "Organization":
		gvr = organizationsGVR
	case ref.APIGroup == rmv1alpha1.GroupName && ref.Kind == "Project":
		gvr = projectsGVR
	case ref.APIGroup == "" && ref.Kind == "Namespace":
		gvr = namespacesGVR
	default:
		return
	}
	if msg := p.unknownConsumer(ctx, gvr, ref.Kind, ref.Name); msg != "" {
		warning.AddWarning(ctx, "", msg)
	}
}

// unknownConsumer says, when no kind object named name exists, so and which
// existing name is nearest; "" when it exists or cannot be read.
func (p *plugin) unknownConsumer(ctx context.Context, gvr schema.GroupVersionResource, kind, name string) string {
	_, err := p.Client().Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return ""
	}
	msg := fmt.Sprintf("spec.consumerRef: there is no %s %s, so this grant limits nothing until one is created", kind, name)
	list, err := p.Client().Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1000})
	if err == nil {
		names := make([]string, 0, len(list.Items))
		for _, o := range list.Items {
			names = append(names, o.GetName())
		}
		if near := quota.Nearest(name, names); near != "" {
			msg += fmt.Sprintf("; did you mean %s?", near)
		}
	}
	return msg
}
