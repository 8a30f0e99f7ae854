package requests

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// Lookup is what checking a request reads: serve's admission reads through
// its dynamic client, the controller through its own.
type Lookup interface {
	// ProjectOrganization is the organization of the Project name, and
	// whether it exists.
	ProjectOrganization(ctx context.Context, name string) (org string, found bool, err error)
	// Registrations are every ResourceRegistration.
	Registrations(ctx context.Context) ([]quotav1alpha1.ResourceRegistration, error)
}

// Check says, on the exact field, why a request can never be met: it is not
// in an organization's namespace, its consumer is not that organization or
// one of its projects, or its resource type is not registered for that
// consumer's kind. nil: it can be.
func Check(ctx context.Context, l Lookup, qr *quotav1alpha1.QuotaRequest) (*field.Error, error) {
	consumer := field.NewPath("spec", "consumerRef")
	org, ok := strings.CutPrefix(qr.Namespace, rmv1alpha1.OrganizationNamespacePrefix)
	if !ok {
		return field.Invalid(field.NewPath("metadata", "namespace"), qr.Namespace,
			"quota requests are made in an organization's namespace, organization-<name>: create it there"), nil
	}
	c := qr.Spec.ConsumerRef
	if c.APIGroup != rmv1alpha1.GroupName || (c.Kind != "Organization" && c.Kind != "Project") {
		return field.Invalid(consumer, fmt.Sprintf("%s/%s %s", c.APIGroup, c.Kind, c.Name),
			fmt.Sprintf("must be the organization %s or one of its projects (apiGroup %s, kind Organization or Project)", org, rmv1alpha1.GroupName)), nil
	}
	if c.Kind == "Organization" && c.Name != org {
		return field.Invalid(consumer.Child("name"), c.Name,
			fmt.Sprintf("organization %s is not this namespace's organization %s: ask for it in organization-%s", c.Name, org, c.Name)), nil
	}
	if c.Kind == "Project" {
		got, found, err := l.ProjectOrganization(ctx, c.Name)
		if err != nil {
			return nil, err
		}
		if !found {
			return field.NotFound(consumer.Child("name"), c.Name), nil
		}
		if got != org {
			return field.Invalid(consumer.Child("name"), c.Name,
				fmt.Sprintf("project %s is not a project of organization %s: name one of its projects, or the organization", c.Name, org)), nil
		}
	}
	regs, err := l.Registrations(ctx)
	if err != nil {
		return nil, err
	}
	var types []string
	for _, reg := range regs {
		if reg.Spec.ResourceType != qr.Spec.ResourceType {
			types = append(types, string(reg.Spec.ResourceType))
			continue
		}
		ct := reg.Spec.ConsumerType
		if ct.Kind == c.Kind && ct.APIGroup == c.APIGroup {
			return nil, nil
		}
		return field.Invalid(field.NewPath("spec", "resourceType"), string(qr.Spec.ResourceType),
			fmt.Sprintf("is registered for consumers of kind %s, not %s: ask for it for a %s", ct.Kind, c.Kind, ct.Kind)), nil
	}
	return field.Invalid(field.NewPath("spec", "resourceType"), string(qr.Spec.ResourceType),
		fmt.Sprintf("is not registered; registered resource types: %s", strings.Join(types, ", "))), nil
}

// ProjectOrganization is the organization a Project belongs to.
func ProjectOrganization(p *rmv1alpha1.Project) string {
	if org := rmv1alpha1.OrganizationOfProject(p); org != "" {
		return org
	}
	if p.Spec.OwnerRef.Kind == rmv1alpha1.ProjectOwnerKindOrganization {
		return p.Spec.OwnerRef.Name
	}
	return ""
}
