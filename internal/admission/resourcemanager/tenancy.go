package resourcemanager

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// PluginName is the admission plugin's name.
const PluginName = "Tenancy"

// CreateProjectsSubresource is the subresource of organizations on which
// creating a project in an organization is authorized (docs/authorization.md).
const CreateProjectsSubresource = "projects"

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update), DynamicAndAuthorizer: plugininit.NewDynamicAndAuthorizer(PluginName)}, nil
	})
}

type plugin struct {
	*admission.Handler
	plugininit.DynamicAndAuthorizer
}

var (
	_ admission.MutationInterface       = &plugin{}
	_ admission.ValidationInterface     = &plugin{}
	_ initializer.WantsDynamicClient    = &plugin{}
	_ initializer.WantsAuthorizer       = &plugin{}
	_ admission.InitializationValidator = &plugin{}

	organizations    = rmv1alpha1.Resource("organizations")
	projects         = rmv1alpha1.Resource("projects")
	organizationsGVR = rmv1alpha1.SchemeGroupVersion.WithResource("organizations")
	organizationKind = rmv1alpha1.SchemeGroupVersion.WithKind("Organization")
	projectKind      = rmv1alpha1.SchemeGroupVersion.WithKind("Project").GroupKind()

	creatorPath = field.NewPath("metadata", "annotations").Key(rmv1alpha1.CreatorAnnotation)
	labelPath   = field.NewPath("metadata", "labels").Key(rmv1alpha1.OrganizationNameLabel)
	ownerPath   = field.NewPath("spec", "ownerRef")
)

// Admit records an Organization's creator and gives a new Project its label
// and ownerReference, after checking that it may be created.
func (p *plugin) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" {
		return nil
	}
	gr := a.GetResource().GroupResource()
	if gr != organizations && gr != projects {
		return nil
	}
	obj, ok := plugininit.Unstructured(a.GetObject())
	if !ok {
		return nil
	}
	if err := p.admit(ctx, a, obj); err != nil {
		return err
	}
	return plugininit.Store(obj, a.GetObject())
}

func (p *plugin) admit(ctx context.Context, a admission.Attributes, obj *unstructured.Unstructured) error {
	switch a.GetResource().GroupResource() {
	case organizations:
		if a.GetOperation() == admission.Create {
			return p.recordCreator(a, obj)
		}
		// An update that omits the creator (kubectl replace of the
		// original manifest) keeps it; one that changes it is refused by
		// Validate.
		if old, ok := plugininit.Unstructured(a.GetOldObject()); ok {
			was, hadIt := old.GetAnnotations()[rmv1alpha1.CreatorAnnotation]
			if _, has := obj.GetAnnotations()[rmv1alpha1.CreatorAnnotation]; hadIt && !has {
				ann := obj.GetAnnotations()
				if ann == nil {
					ann = map[string]string{}
				}
				ann[rmv1alpha1.CreatorAnnotation] = was
				obj.SetAnnotations(ann)
			}
		}
	case projects:
		if a.GetOperation() == admission.Create {
			return p.admitProject(ctx, a, obj)
		}
		// The label follows spec.ownerRef, which the schema keeps immutable.
		if name, _, _ := unstructured.NestedString(obj.Object, "spec", "ownerRef", "name"); name != "" {
			setLabel(obj, rmv1alpha1.OrganizationNameLabel, name)
		}
	}
	return nil
}

// Validate keeps an Organization's creator annotation as admission recorded
// it, whatever later mutating steps or updates try.
func (p *plugin) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" || a.GetResource().GroupResource() != organizations {
		return nil
	}
	obj, ok := plugininit.Unstructured(a.GetObject())
	if !ok {
		return nil
	}
	got, has := obj.GetAnnotations()[rmv1alpha1.CreatorAnnotation]
	switch a.GetOperation() {
	case admission.Create:
		if errs := validateName(obj.GetName()); len(errs) > 0 {
			return apierrors.NewInvalid(organizationKind.GroupKind(), obj.GetName(), errs)
		}
		if want := a.GetUserInfo().GetName(); !has || got != want {
			return apierrors.NewInvalid(organizationKind.GroupKind(), a.GetName(), field.ErrorList{
				field.Invalid(creatorPath, got, fmt.Sprintf("must be the creating user %q, as admission records it; remove it from the request", want))})
		}
	case admission.Update:
		old, ok := plugininit.Unstructured(a.GetOldObject())
		if !ok {
			return nil
		}
		was, hadIt := old.GetAnnotations()[rmv1alpha1.CreatorAnnotation]
		if has != hadIt || got != was {
			return apierrors.NewInvalid(organizationKind.GroupKind(), a.GetName(), field.ErrorList{
				field.Forbidden(creatorPath, fmt.Sprintf("records who created the organization (%q) and cannot be changed or removed; bind other owners with a RoleBinding of %s in namespace %s instead",
					was, rmv1alpha1.OrganizationOwnerRole, rmv1alpha1.OrganizationNamespace(a.GetName())))})
		}
	}
	return nil
}

// validateName refuses an organization name that cannot name its namespace,
// at metadata.name. The CRD's schema has the same rules (for servers without
// this plugin) but reports them at the object's root.
func validateName(name string) field.ErrorList {
	path := field.NewPath("metadata", "name")
	if len(name) > rmv1alpha1.OrganizationNameMaxLength {
		return field.ErrorList{field.Invalid(path, name, fmt.Sprintf("must be at most %d characters (it has %d), so that the organization's namespace %s is a DNS label of at most 63; choose a shorter name",
			rmv1alpha1.OrganizationNameMaxLength, len(name), rmv1alpha1.OrganizationNamespace("<name>")))}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg+"; it names the organization's namespace "+rmv1alpha1.OrganizationNamespace("<name>")))
	}
	return errs
}

func (p *plugin) recordCreator(a admission.Attributes, obj *unstructured.Unstructured) error {
	// A generated name is not known yet; Validate checks it.
	if obj.GetName() != "" {
		if errs := validateName(obj.GetName()); len(errs) > 0 {
			return apierrors.NewInvalid(organizationKind.GroupKind(), obj.GetName(), errs)
		}
	}
	u := a.GetUserInfo()
	if u == nil || u.GetName() == "" {
		return apierrors.NewForbidden(organizations, a.GetName(), fmt.Errorf("an organization needs an authenticated creator, who becomes its owner"))
	}
	ann := obj.GetAnnotations()
	if v, ok := ann[rmv1alpha1.CreatorAnnotation]; ok && v != u.GetName() {
		return apierrors.NewInvalid(organizationKind.GroupKind(), a.GetName(), field.ErrorList{
			field.Forbidden(creatorPath, fmt.Sprintf("is recorded by the server as the creating user (%q), not set by clients; remove it from the request (set to %q)", u.GetName(), v))})
	}
	if ann == nil {
		ann = map[string]string{}
	}
	ann[rmv1alpha1.CreatorAnnotation] = u.GetName()
	obj.SetAnnotations(ann)
	return nil
}

func (p *plugin) admitProject(ctx context.Context, a admission.Attributes, obj *unstructured.Unstructured) error {
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "ownerRef", "kind")
	orgName, _, _ := unstructured.NestedString(obj.Object, "spec", "ownerRef", "name")
	if plane, ok := planes.From(ctx); ok && plane.Kind == planes.Organizations {
		// Created in an organization's control plane: the path says whose.
		if orgName != "" && orgName != plane.Name {
			return apierrors.NewInvalid(projectKind, a.GetName(), field.ErrorList{field.Invalid(ownerPath.Child("name"), orgName,
				fmt.Sprintf("a project created in the control plane of organization %s belongs to it; omit spec.ownerRef, name %s, or create the project in %s's control plane", plane.Name, plane.Name, orgName))})
		}
		kind, orgName = string(rmv1alpha1.ProjectOwnerKindOrganization), plane.Name
		if err := unstructured.SetNestedField(obj.Object, map[string]interface{}{"kind": kind, "name": orgName}, "spec", "ownerRef"); err != nil {
			return apierrors.NewInternalError(err)
		}
	}
	var errs field.ErrorList
	if kind != string(rmv1alpha1.ProjectOwnerKindOrganization) {
		errs = append(errs, field.NotSupported(ownerPath.Child("kind"), kind, []string{string(rmv1alpha1.ProjectOwnerKindOrganization)}))
	}
	if orgName == "" {
		errs = append(errs, field.Required(ownerPath.Child("name"), "name the organization the project belongs to and whose quota it charges"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(projectKind, a.GetName(), errs)
	}
	org, err := p.Client().Resource(organizationsGVR).Get(ctx, orgName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Retryable: applied in the same sync (kubectl apply of a
		// directory, Argo CD, Flux), the organization may come later.
		return refusal.NotYet(projects, a.GetName(), fmt.Sprintf(
			"Project %s: spec.ownerRef.name: Organization %q does not exist yet; a project charges its organization's quota, so the organization comes first: create it (or name an existing one: kubectl get organizations), then retry; nothing was created",
			a.GetName(), orgName), "spec.ownerRef.name")
	} else if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("reading Organization %s named by spec.ownerRef.name: %w", orgName, err))
	}
	if org.GetDeletionTimestamp() != nil {
		return apierrors.NewInvalid(projectKind, a.GetName(), field.ErrorList{field.Invalid(ownerPath.Child("name"), orgName,
			"the organization is being deleted, with its projects; create the project in another organization, or wait until it is gone and create it again")})
	}
	if err := authorizeCreate(ctx, p.Authorizer(), a.GetUserInfo(), orgName); err != nil {
		return apierrors.NewForbidden(projects, a.GetName(), err)
	}
	setLabel(obj, rmv1alpha1.OrganizationNameLabel, orgName)
	refs := obj.GetOwnerReferences()
	for _, r := range refs {
		if r.UID == org.GetUID() {
			return nil
		}
	}
	obj.SetOwnerReferences(append(refs, metav1.OwnerReference{
		APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: organizationKind.Kind,
		Name: org.GetName(), UID: org.GetUID(), BlockOwnerDeletion: ptr.To(true),
	}))
	return nil
}

// CreateProjectAttributes is the question admission asks the authorizer
// before a user creates a project in organization org: may the user create
// the subresource projects of organizations named org, in the organization's
// namespace. A RoleBinding of quotaplane-organization-owner in that namespace
// (the one the organization controller makes for its creator) allows it; so
// does a ClusterRole allowing it cluster-wide (quotaplane-platform-admin).
func CreateProjectAttributes(u user.Info, org string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: u, Verb: "create", APIGroup: rmv1alpha1.GroupName, APIVersion: rmv1alpha1.SchemeGroupVersion.Version,
		Resource: organizations.Resource, Subresource: CreateProjectsSubresource, Name: org,
		Namespace: rmv1alpha1.OrganizationNamespace(org), ResourceRequest: true,
	}
}

func authorizeCreate(ctx context.Context, az authorizer.Authorizer, u user.Info, org string) error {
	decision, reason, err := az.Authorize(ctx, CreateProjectAttributes(u, org))
	if decision == authorizer.DecisionAllow {
		return nil
	}
	why := ""
	if reason != "" {
		why = " (" + reason + ")"
	} else if err != nil {
		why = " (" + err.Error() + ")"
	}
	name := "<anonymous>"
	if u != nil {
		name = u.GetName()
	}
	return fmt.Errorf("user %q may not create projects in Organization %s (spec.ownerRef.name): it needs verb \"create\" on organizations/projects named %s in namespace %s%s; "+
		"ask an owner of %s to bind you to ClusterRole %s in namespace %s, or create the project in an organization you own (docs/authorization.md)",
		name, org, org, rmv1alpha1.OrganizationNamespace(org), why, org, rmv1alpha1.OrganizationOwnerRole, rmv1alpha1.OrganizationNamespace(org))
}

func setLabel(obj *unstructured.Unstructured, k, v string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	obj.SetLabels(l)
}
