package delegation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// PluginName is the plugin's name in the admission chain.
const PluginName = "QuotaHierarchy"

// PlatformNamespaceLabel marks a namespace as a platform namespace.
const PlatformNamespaceLabel = "quota.miloapis.com/platform"

// Config is what the plugin is told by the server.
type Config struct {
	Handle              *route.Handle
	SystemNamespace     string
	PlatformNamespaces  []string
	ReservedLabelPrefix string
}

// Register adds the plugin to plugins.
func Register(plugins *admission.Plugins, cfg Config) {
	if cfg.ReservedLabelPrefix == "" {
		cfg.ReservedLabelPrefix = quotav1alpha1.DefaultReservedLabelPrefix
	}
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete),
			DynamicAndAuthorizer: plugininit.NewDynamicAndAuthorizer(PluginName), cfg: cfg}, nil
	})
}

type plugin struct {
	*admission.Handler
	plugininit.DynamicAndAuthorizer
	cfg Config
}

var (
	_ admission.MutationInterface       = &plugin{}
	_ admission.ValidationInterface     = &plugin{}
	_ initializer.WantsDynamicClient    = &plugin{}
	_ initializer.WantsAuthorizer       = &plugin{}
	_ admission.InitializationValidator = &plugin{}

	grants        = quotav1alpha1.SchemeGroupVersion.WithResource("resourcegrants").GroupResource()
	organizations = rmv1alpha1.Resource("organizations")
	projects      = rmv1alpha1.Resource("projects")
	projectsGVR   = rmv1alpha1.SchemeGroupVersion.WithResource("projects")
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	grantKind     = quotav1alpha1.SchemeGroupVersion.WithKind("ResourceGrant").GroupKind()

	budgetLabelPath = field.NewPath("metadata", "labels").Key(quotav1alpha1.BudgetLabel)
	consumerPath    = field.NewPath("spec", "consumerRef")
	selectorPath    = field.NewPath("spec", "consumerSelector")
)

// isPlatform reports whether a user is the platform: may create
// ResourceGrants in the system namespace.
func (p *plugin) isPlatform(ctx context.Context, u user.Info) (bool, error) {
	d, _, err := p.Authorizer().Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: "create", APIGroup: quotav1alpha1.SchemeGroupVersion.Group,
		APIVersion: quotav1alpha1.SchemeGroupVersion.Version, Resource: "resourcegrants", Namespace: p.cfg.SystemNamespace, ResourceRequest: true})
	if err != nil && d != authorizer.DecisionAllow {
		return false, err
	}
	return d == authorizer.DecisionAllow, nil
}

// organizationOf returns the organization whose namespace ns is, "".
func organizationOf(ns string) string {
	org, ok := strings.CutPrefix(ns, "organization-")
	if !ok {
		return ""
	}
	return org
}

// Admit labels a grant an organization's owners write for one of its
// projects with their organization: it draws from its budget.
func (p *plugin) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != grants || a.GetSubresource() != "" || a.GetOperation() == admission.Delete {
		return nil
	}
	org := organizationOf(a.GetNamespace())
	if org == "" {
		return nil
	}
	obj, err := meta.Accessor(a.GetObject()) // typed (served natively) or unstructured (a CRD)
	if err != nil {
		return nil
	}
	platform, err := p.isPlatform(ctx, a.GetUserInfo())
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	labels := obj.GetLabels()
	if platform {
		// The platform keeps a delegated grant delegated when it edits it.
		if old, err := meta.Accessor(a.GetOldObject()); err == nil && a.GetOldObject() != nil {
			if was := old.GetLabels()[quotav1alpha1.BudgetLabel]; was != "" && labels[quotav1alpha1.BudgetLabel] == "" {
				setLabel(obj, quotav1alpha1.BudgetLabel, was)
			}
		}
		return nil
	}
	setLabel(obj, quotav1alpha1.BudgetLabel, org)
	return nil
}

func setLabel(obj metav1.Object, k, v string) {
	l := obj.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[k] = v
	obj.SetLabels(l)
}

// Validate applies the rules of the package comment.
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetSubresource() != "" {
		return nil
	}
	switch a.GetResource().GroupResource() {
	case grants:
		return p.validateGrant(ctx, a)
	case organizations, projects:
		return p.validateReservedLabels(ctx, a)
	}
	return nil
}

func (p *plugin) validateReservedLabels(ctx context.Context, a admission.Attributes) error {
	if a.GetOperation() == admission.Delete {
		return nil
	}
	var now, was map[string]string
	if obj, ok := a.GetObject().(metav1.Object); ok {
		now = obj.GetLabels()
	}
	if old, ok := a.GetOldObject().(metav1.Object); ok && old != nil {
		was = old.GetLabels()
	}
	var changed []string
	for k, v := range now {
		if strings.HasPrefix(k, p.cfg.ReservedLabelPrefix) && (was == nil || was[k] != v || !has(was, k)) {
			changed = append(changed, k)
		}
	}
	for k := range was {
		if strings.HasPrefix(k, p.cfg.ReservedLabelPrefix) && !has(now, k) {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	platform, err := p.isPlatform(ctx, a.GetUserInfo())
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if platform {
		return nil
	}
	slices.Sort(changed)
	var errs field.ErrorList
	for _, k := range changed {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "labels").Key(k), fmt.Sprintf(
			"labels under %s are set only by the platform: quota groups select on them, so a tenant may not set, change or remove one (asked by %q); "+
				"leave the label as it is, or ask the platform administrators to change it", p.cfg.ReservedLabelPrefix, a.GetUserInfo().GetName())))
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), a.GetName(), errs.ToAggregate())
}

func has(m map[string]string, k string) bool { _, ok := m[k]; return ok }

func (p *plugin) validateGrant(ctx context.Context, a admission.Attributes) error {
	platform, err := p.isPlatform(ctx, a.GetUserInfo())
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	ns, name := a.GetNamespace(), a.GetName()
	forbid := func(msg string) error {
		return apierrors.NewForbidden(grants, name, errors.New(msg))
	}
	// Tenants may change or delete only the grants they wrote.
	if !platform && a.GetOperation() != admission.Create {
		old, err := toGrant(a.GetOldObject())
		if err == nil && old.Labels[quotav1alpha1.BudgetLabel] == "" {
			return forbid(fmt.Sprintf("ResourceGrant %s/%s was written by the platform (it does not draw from a budget: no label %s); "+
				"an organization's owners may change or delete only the grants they wrote for their projects. Ask the platform administrators to change it, "+
				"or write another grant for the project within your organization's budget", ns, name, quotav1alpha1.BudgetLabel))
		}
	}
	if a.GetOperation() == admission.Delete {
		return nil
	}
	g, err := toGrant(a.GetObject())
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if err := p.validateSelector(g); err != nil {
		return err
	}
	if platform {
		// Only to the platform: the nearest name would tell a tenant the
		// names of other tenants' organizations and projects.
		p.warnUnknownConsumer(ctx, g)
	}
	if p.isPlatformNamespace(ctx, ns) {
		if !platform {
			return forbid(fmt.Sprintf("namespace %s is a platform namespace: its grants may name any consumer, so only the platform writes them (user %q may not). "+
				"An organization's owners write grants for their projects in organization-<name>", ns, a.GetUserInfo().GetName()))
		}
		return nil
	}
	ref := g.Spec.ConsumerRef
	if project := p.projectOfNamespace(ctx, ns); project != "" {
		// A project's namespace holds its control plane's quota objects
		// (docs/control-planes.md): grants there name that project only,
		// and only the platform writes them (a GrantCreationPolicy with a
		// parent context, or an administrator).
		if g.Spec.ConsumerSelector != nil || ref.APIGroup != rmv1alpha1.GroupName || ref.Kind != "Project" || ref.Name != project {
			return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Invalid(consumerPath, fmt.Sprintf("%s %s", ref.Kind, ref.Name), fmt.Sprintf(
				"namespace %s holds Project %s's control plane quota: a grant there names that project (kind Project, apiGroup %s, name %s) and nothing else", ns, project, rmv1alpha1.GroupName, project))})
		}
		if !platform {
			return forbid(fmt.Sprintf("namespace %s holds Project %s's control plane quota, which only the platform grants (user %q may not); an organization's owners write grants for their projects in organization-<name>, within its budget", ns, project, a.GetUserInfo().GetName()))
		}
		return nil
	}
	org := organizationOf(ns)
	if org == "" {
		return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "namespace"), ns, fmt.Sprintf(
			"a ResourceGrant here would count for anyone it names, so it may not live in namespace %s: write it in a platform namespace (%s) to name any consumer, "+
				"or in organization-<name> to name that organization's projects", ns, strings.Join(p.platformNamespaces(), ", ")))})
	}
	if g.Spec.ConsumerSelector != nil {
		return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Forbidden(selectorPath, fmt.Sprintf(
			"a group grant caps consumers across organizations, so it lives in a platform namespace (%s), written by the platform; not in %s", strings.Join(p.platformNamespaces(), ", "), ns))})
	}
	switch {
	case ref.APIGroup == rmv1alpha1.GroupName && ref.Kind == "Organization":
		if ref.Name != org {
			return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Invalid(consumerPath.Child("name"), ref.Name, fmt.Sprintf(
				"a grant in %s may name only Organization %s and its projects; grants for Organization %s live in organization-%s or a platform namespace", ns, org, ref.Name, ref.Name))})
		}
		if !platform {
			return forbid(fmt.Sprintf("only the platform sets Organization %s's own limits: user %q may not write a grant naming the organization itself. "+
				"Split the organization's quota among its projects with grants naming them (within its budget), or ask the platform administrators to raise it", org, a.GetUserInfo().GetName()))
		}
		return nil
	case ref.APIGroup == rmv1alpha1.GroupName && ref.Kind == "Project":
		proj, err := p.Client().Resource(projectsGVR).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			// Retryable: applied in one sync, the project may come later.
			return refusal.NotYet(quotav1alpha1.Resource("resourcegrants"), name, fmt.Sprintf(
				"ResourceGrant %s: spec.consumerRef.name: Project %q does not exist yet; a grant in %s may name only Organization %s's projects (kubectl get projects -l %s=%s): create the project first, then retry; nothing was created",
				name, ref.Name, ns, org, rmv1alpha1.OrganizationNameLabel, org), "spec.consumerRef.name")
		} else if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("reading Project %s named by spec.consumerRef.name: %w", ref.Name, err))
		}
		if got := rmv1alpha1.OrganizationOfProject(proj); got != org {
			return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Invalid(consumerPath.Child("name"), ref.Name, fmt.Sprintf(
				"Project %s belongs to Organization %s, not %s: a grant in %s may name only Organization %s's projects", ref.Name, got, org, ns, org))})
		}
	default:
		return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Invalid(consumerPath.Child("kind"), ref.Kind, fmt.Sprintf(
			"a grant in %s may name only Organization %s's projects (kind Project, apiGroup %s); grants for other consumers live in a platform namespace (%s)",
			ns, org, rmv1alpha1.GroupName, strings.Join(p.platformNamespaces(), ", ")))})
	}
	if g.Labels[quotav1alpha1.BudgetLabel] == "" {
		return nil // the platform's grant: outside the budget
	}
	if g.Labels[quotav1alpha1.BudgetLabel] != org {
		return apierrors.NewInvalid(grantKind, name, field.ErrorList{field.Invalid(budgetLabelPath, g.Labels[quotav1alpha1.BudgetLabel],
			fmt.Sprintf("a delegated grant in %s draws from Organization %s's budget; set the label to %s or remove it", ns, org, org))})
	}
	if p.cfg.Handle == nil {
		return nil
	}
	res, err := p.cfg.Handle.DecideBudget(ctx, g, a.IsDryRun())
	if errors.Is(err, route.ErrNotLeader) {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("the budget of Organization %s cannot be checked right now (%v); retry the request", org, err))
	} else if err != nil {
		return apierrors.NewInternalError(err)
	}
	if !res.OK {
		return forbid("insufficient budget: " + res.Message + "; the grant was not stored")
	}
	return nil
}

// validateSelector checks a group grant's selector: valid, and on reserved
// labels only.
func (p *plugin) validateSelector(g *quotav1alpha1.ResourceGrant) error {
	sel := g.Spec.ConsumerSelector
	if sel == nil {
		return nil
	}
	var errs field.ErrorList
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		errs = append(errs, field.Invalid(selectorPath, sel, err.Error()))
	}
	if len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Required(selectorPath, "select the group's consumers by at least one label under "+p.cfg.ReservedLabelPrefix))
	}
	reserved := func(path *field.Path, k string) {
		if !strings.HasPrefix(k, p.cfg.ReservedLabelPrefix) {
			errs = append(errs, field.Invalid(path, k, fmt.Sprintf("a group selects only on labels under %s, which only the platform may set; "+
				"a tenant could set or remove %s on its own project and so leave the group's cap", p.cfg.ReservedLabelPrefix, k)))
		}
	}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		reserved(selectorPath.Child("matchLabels").Key(k), k)
	}
	for i, e := range sel.MatchExpressions {
		reserved(selectorPath.Child("matchExpressions").Index(i).Child("key"), e.Key)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(grantKind, g.Name, errs)
	}
	return nil
}

func (p *plugin) platformNamespaces() []string {
	return append([]string{p.cfg.SystemNamespace}, p.cfg.PlatformNamespaces...)
}

// projectOfNamespace is the project whose namespace at the root ns is
// (project-<name>, labelled with it by the project controller), "" for any
// other namespace.
func (p *plugin) projectOfNamespace(ctx context.Context, ns string) string {
	name, ok := strings.CutPrefix(ns, "project-")
	if !ok {
		return ""
	}
	obj, err := p.Client().Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
	if err != nil || obj.GetLabels()[rmv1alpha1.ProjectNameLabel] != name {
		return ""
	}
	return name
}

// isPlatformNamespace: the system namespace, a flag's, or labelled so.
func (p *plugin) isPlatformNamespace(ctx context.Context, ns string) bool {
	if slices.Contains(p.platformNamespaces(), ns) {
		return true
	}
	obj, err := p.Client().Resource(namespacesGVR).Get(ctx, ns, metav1.GetOptions{})
	return err == nil && obj.GetLabels()[PlatformNamespaceLabel] == "true"
}

func toGrant(obj runtime.Object) (*quotav1alpha1.ResourceGrant, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		if g, ok := obj.(*quotav1alpha1.ResourceGrant); ok {
			return g, nil
		}
		return nil, fmt.Errorf("expected a ResourceGrant, got %T", obj)
	}
	g := &quotav1alpha1.ResourceGrant{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, g); err != nil {
		return nil, fmt.Errorf("decoding the ResourceGrant: %w", err)
	}
	return g, nil
}
