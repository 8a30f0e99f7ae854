package claimguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/served"
)

// PluginName is the admission plugin's name.
const PluginName = "QuotaClaimGuard"

// Register adds the plugin to plugins. engineInProcess says whether serve
// runs the quota engine itself: only then are the engine's own records (a
// claim's status, the ledger, the seal key) reserved to serve's identity; a
// serve without its engine leaves them to the external engine and to RBAC.
func Register(plugins *admission.Plugins, systemNamespace string, engineInProcess bool) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) {
		return &plugin{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete),
			DynamicAndAuthorizer: plugininit.NewDynamicAndAuthorizer(PluginName), systemNamespace: systemNamespace, engineInProcess: engineInProcess}, nil
	})
}

type plugin struct {
	*admission.Handler
	plugininit.DynamicAndAuthorizer
	systemNamespace string
	engineInProcess bool

	servedOnce sync.Once
	served     *served.Resolver
}

var (
	_              admission.ValidationInterface     = &plugin{}
	_              initializer.WantsDynamicClient    = &plugin{}
	_              initializer.WantsAuthorizer       = &plugin{}
	_              admission.InitializationValidator = &plugin{}
	claimsResource                                   = quotav1alpha1.Resource("resourceclaims")
)

// isServer reports whether the request comes from serve itself: its garbage
// collector, namespace controller or quota engine.
func isServer(u user.Info) bool {
	return u != nil && u.GetName() == user.APIServerUser
}

// Validate applies the rules in the package comment.
func (p *plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	gr := a.GetResource().GroupResource()
	switch {
	case gr == claimsResource:
		return p.validateClaim(ctx, a)
	case gr.Group == "" && gr.Resource == "namespaces" && a.GetOperation() == admission.Delete && a.GetSubresource() == "":
		return p.validateNamespaceDelete(ctx, a)
	case !p.engineInProcess:
		return nil
	case gr.Group == "" && gr.Resource == "secrets" && a.GetNamespace() == p.systemNamespace && a.GetName() == admit.SealSecretName:
		if a.GetOperation() == admission.Create || isServer(a.GetUserInfo()) {
			return nil
		}
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf(
			"the Secret %s/%s holds the key that seals the quota engine's decisions; only the engine writes it",
			a.GetNamespace(), a.GetName()))
	case gr.Group == "" && gr.Resource == "configmaps" && a.GetNamespace() == p.systemNamespace && a.GetName() == admit.LedgerName:
		if a.GetOperation() == admission.Create || isServer(a.GetUserInfo()) {
			return nil
		}
		return apierrors.NewForbidden(gr, a.GetName(), fmt.Errorf(
			"the ConfigMap %s/%s is the quota engine's decision ledger and fence; only the engine writes it (deleting or editing it could let a deposed engine replica decide again)",
			a.GetNamespace(), a.GetName()))
	}
	return nil
}

func (p *plugin) validateClaim(ctx context.Context, a admission.Attributes) error {
	u := a.GetUserInfo()
	if isServer(u) {
		if a.GetOperation() == admission.Delete {
			return p.guardDelete(ctx, a, true)
		}
		return nil
	}
	switch {
	case a.GetOperation() == admission.Create && a.GetSubresource() == "":
		c, err := toClaim(a.GetObject())
		if err != nil || c == nil {
			return err
		}
		if err := claimauthz.AuthorizeClaim(ctx, p.Authorizer(), u, c.Spec.ConsumerRef); err != nil {
			return apierrors.NewForbidden(claimsResource, a.GetName(), err)
		}
	case a.GetSubresource() == "status" && p.engineInProcess:
		return apierrors.NewForbidden(claimsResource, a.GetName(), fmt.Errorf(
			"the status of a ResourceClaim is its quota decision and is written by the quota engine only; nothing else may set it"))
	case a.GetOperation() == admission.Update && a.GetSubresource() == "":
		old, err := toClaim(a.GetOldObject())
		if err != nil || old == nil || old.Annotations[quotav1alpha1.AnnotationResourceUID] == "" {
			return err
		}
		c, err := toClaim(a.GetObject())
		if err != nil || c == nil {
			return err
		}
		if msg := cutFromObject(old, c); msg != "" {
			return apierrors.NewForbidden(claimsResource, a.GetName(), fmt.Errorf(
				"ResourceClaim %s/%s holds the quota of %s; %s, which only the garbage collector and the quota engine may do: delete the object to release its quota",
				old.Namespace, old.Name, objectName(old), msg))
		}
	case a.GetOperation() == admission.Delete:
		return p.guardDelete(ctx, a, false)
	}
	return nil
}

// cutFromObject says how an update cuts a claim from its object, or "".
func cutFromObject(old, c *quotav1alpha1.ResourceClaim) string {
	for _, k := range []string{quotav1alpha1.AnnotationResourceUID, quotav1alpha1.AnnotationResource, quotav1alpha1.AnnotationPolicy, quotav1alpha1.AnnotationPolicyGeneration, quotav1alpha1.AnnotationGrantKey} {
		if old.Annotations[k] != c.Annotations[k] {
			return fmt.Sprintf("this update changes its annotation %s", k)
		}
	}
	uid := old.Annotations[quotav1alpha1.AnnotationResourceUID]
	had, has := false, false
	for _, o := range old.OwnerReferences {
		had = had || string(o.UID) == uid
	}
	for _, o := range c.OwnerReferences {
		has = has || string(o.UID) == uid
	}
	if had && !has {
		return "this update removes its ownerReference to that object (as kubectl delete --cascade=orphan would)"
	}
	return ""
}

// objectExists reads the claim's object live, at the version served now
// (the one the claim recorded may not be served any more). An object whose
// kind serves no version at all is taken to exist: nothing may release its
// quota until it can be read again.
func (p *plugin) objectExists(ctx context.Context, c *quotav1alpha1.ResourceClaim) (bool, error) {
	gvr, ok := quotav1alpha1.ParseResource(c.Annotations[quotav1alpha1.AnnotationResource])
	ref := c.Spec.ResourceRef
	if !ok || ref == nil {
		return false, nil
	}
	p.servedOnce.Do(func() { p.served = served.New(p.Client()) })
	var o *unstructured.Unstructured
	err := p.served.Read(ctx, gvr, func(at schema.GroupVersionResource) error {
		var err error
		o, err = p.Client().Resource(at).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		return err
	})
	switch {
	case errors.Is(err, served.ErrNotServed):
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return string(o.GetUID()) == c.Annotations[quotav1alpha1.AnnotationResourceUID] && o.GetDeletionTimestamp() == nil, nil
}

func objectName(c *quotav1alpha1.ResourceClaim) string {
	ref := c.Spec.ResourceRef
	if ref == nil {
		return "its object"
	}
	name := ref.Name
	if ref.Namespace != "" {
		name = ref.Namespace + "/" + ref.Name
	}
	return fmt.Sprintf("%s %s (uid %s)", ref.Kind, name, c.Annotations[quotav1alpha1.AnnotationResourceUID])
}

func toClaim(obj runtime.Object) (*quotav1alpha1.ResourceClaim, error) {
	if obj == nil {
		return nil, nil
	}
	if c, ok := obj.(*quotav1alpha1.ResourceClaim); ok { // served natively
		return c, nil
	}
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a ResourceClaim was expected, not %T", obj))
	}
	c := &quotav1alpha1.ResourceClaim{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), c); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the ResourceClaim: %v", err))
	}
	return c, nil
}

// guardDelete refuses to delete a claim made at admission while its object
// exists. serve's own controllers (the garbage collector after an owner, the
// engine after an object it watches, the namespace controller emptying a
// namespace) may, but for one claim: one whose object lives outside the
// claim's namespace. Deleting its namespace would release the quota of an
// object that is still there; the namespace stays Terminating, its
// NamespaceDeletionContentFailure condition saying why, until the object is
// deleted.
func (p *plugin) guardDelete(ctx context.Context, a admission.Attributes, byServer bool) error {
	old, err := toClaim(a.GetOldObject())
	if err != nil || old == nil || old.Annotations[quotav1alpha1.AnnotationResourceUID] == "" || (byServer && !elsewhere(old)) {
		return err
	}
	exists, err := p.objectExists(ctx, old)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("checking whether the object of ResourceClaim %s/%s exists: %w", old.Namespace, old.Name, err))
	}
	if !exists {
		return nil
	}
	why := "which exists; delete that object to release its quota (its claim goes with it)"
	if byServer {
		why = "which lives outside this namespace and exists; the claim stays until that object is deleted"
	}
	return apierrors.NewForbidden(claimsResource, a.GetName(), fmt.Errorf("ResourceClaim %s/%s holds the quota of %s, %s",
		old.Namespace, old.Name, objectName(old), why))
}

// elsewhere reports whether a claim's object lives outside the claim's
// namespace (in another namespace, or cluster-scoped).
func elsewhere(c *quotav1alpha1.ResourceClaim) bool {
	ref := c.Spec.ResourceRef
	return ref != nil && ref.Namespace != c.Namespace
}

// maxNamed bounds the objects a refusal names.
const maxNamed = 5

// validateNamespaceDelete refuses to delete a namespace holding the claims
// of objects that live elsewhere and exist: their quota would be released
// with the namespace while they stay. The message names them and says what
// to do.
func (p *plugin) validateNamespaceDelete(ctx context.Context, a admission.Attributes) error {
	ns := a.GetName()
	list, err := p.Client().Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims")).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the quota API is not served yet: no claims
		}
		return apierrors.NewInternalError(fmt.Errorf("listing the ResourceClaims of namespace %s: %w", ns, err))
	}
	var held []string
	for i := range list.Items {
		c, err := toClaim(&list.Items[i])
		if err != nil || c == nil || c.Annotations[quotav1alpha1.AnnotationResourceUID] == "" || !elsewhere(c) {
			continue
		}
		exists, err := p.objectExists(ctx, c)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("checking whether the object of ResourceClaim %s/%s exists: %w", c.Namespace, c.Name, err))
		}
		if exists {
			held = append(held, objectName(c))
		}
	}
	if len(held) == 0 {
		return nil
	}
	named := held
	if len(named) > maxNamed {
		named = append(append([]string(nil), named[:maxNamed]...), fmt.Sprintf("and %d more", len(held)-maxNamed))
	}
	return apierrors.NewForbidden(a.GetResource().GroupResource(), ns, fmt.Errorf(
		"namespace %s holds the ResourceClaims of %d objects that live outside it and exist (%s); deleting it would release their quota while they stay: delete those objects first (their claims go with them), then the namespace",
		ns, len(held), strings.Join(named, ", ")))
}
