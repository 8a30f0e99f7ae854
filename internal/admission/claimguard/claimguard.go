package claimguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/plugininit"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/engine/admit"
	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
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

	planeClients plugininit.PlaneClients

	servedOnce sync.Once
	served     *kinds.Resolver
}

// SetPlaneClients implements plugininit.WantsPlaneClients.
func (p *plugin) SetPlaneClients(c plugininit.PlaneClients) { p.planeClients = c }

// ValidateInitialization implements admission.InitializationValidator: the
// objects of control planes must be readable, or their claims could never
// be judged.
func (p *plugin) ValidateInitialization() error {
	if err := p.DynamicAndAuthorizer.ValidateInitialization(); err != nil {
		return err
	}
	if p.planeClients == nil {
		return fmt.Errorf("%s needs clients of the control planes (plugininit.NewPlanesInitializer)", PluginName)
	}
	return nil
}

var (
	_              admission.ValidationInterface     = &plugin{}
	_              initializer.WantsDynamicClient    = &plugin{}
	_              initializer.WantsAuthorizer       = &plugin{}
	_              admission.InitializationValidator = &plugin{}
	_              plugininit.WantsPlaneClients      = &plugin{}
	claimsResource                                   = quotav1alpha1.Resource("resourceclaims")
	grantsResource                                   = quotav1alpha1.Resource("resourcegrants")
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
		if _, inPlane := planes.From(ctx); inPlane {
			return nil // a plane's namespaces hold no claims: they are kept at the root
		}
		return p.validateNamespaceDelete(ctx, a)
	case gr == grantsResource && a.GetOperation() == admission.Create && a.GetSubresource() == "":
		return emptyWindow(a, time.Now())
	case !p.engineInProcess:
		return nil
	case gr == grantsResource && a.GetOperation() == admission.Update && a.GetSubresource() == "status" && !isServer(a.GetUserInfo()):
		return windowChange(a)
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

// validateClaim gathers what the decisions of decide.go need for one
// request on a claim, and asks them.
func (p *plugin) validateClaim(ctx context.Context, a admission.Attributes) error {
	u := a.GetUserInfo()
	switch {
	case a.GetOperation() == admission.Create && a.GetSubresource() == "":
		c, err := toClaim(a.GetObject())
		if err != nil || c == nil {
			return err
		}
		var review access
		if cluster, ok := c.Labels[members.Label]; ok {
			review = p.ask(ctx, members.Access(u, cluster, members.VerbReview))
		}
		if msg := createMarkRefusal(c, review, u.GetName()); msg != "" {
			return apierrors.NewForbidden(claimsResource, a.GetName(), errors.New(msg))
		}
		if isServer(u) {
			return nil
		}
		if err := charge.AuthorizeClaim(ctx, p.Authorizer(), u, a.GetName(), c); err != nil {
			return err
		}
	case a.GetOperation() == admission.Update:
		if a.GetSubresource() == "status" && p.engineInProcess && !isServer(u) {
			return apierrors.NewForbidden(claimsResource, a.GetName(), fmt.Errorf(
				"the status of a ResourceClaim is its quota decision and is written by the quota engine only; nothing else may set it"))
		}
		old, err := toClaim(a.GetOldObject())
		if err != nil || old == nil {
			return err
		}
		c, err := toClaim(a.GetObject())
		if err != nil || c == nil {
			return err
		}
		if msg := markChange(old, c); msg != "" {
			return apierrors.NewForbidden(claimsResource, a.GetName(), errors.New(markRefusal(old, msg)))
		}
		if !madeAtAdmission(old) {
			return nil
		}
		if cut := cutFromObject(old, c); cut != "" {
			return p.guardRelease(ctx, a, old, "updating ("+cut+")")
		}
	case a.GetOperation() == admission.Delete:
		old, err := toClaim(a.GetOldObject())
		if err != nil || old == nil || !(madeAtAdmission(old) || old.Labels[members.Label] != "") {
			return err
		}
		return p.guardRelease(ctx, a, old, "deleting")
	}
	return nil
}

// guardRelease refuses what (a delete, or an update cutting the claim from
// its object) on claim c while its object is live where it is stored, or,
// for a member cluster's claim, unless the requester may release that
// cluster's claims. Every requester is held to it: users, serve's garbage
// collector, namespace controller and quota engine (they release a claim
// once its object is gone, which this lets through).
func (p *plugin) guardRelease(ctx context.Context, a admission.Attributes, c *quotav1alpha1.ResourceClaim, what string) error {
	h, err := p.holderOf(ctx, c, nil)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("%s ResourceClaim %s/%s: checking whether its object %s is still stored %s: %w; retry in a moment",
			what, c.Namespace, c.Name, objectName(c), holder{plane: c.Annotations[planes.Annotation]}.where(), err))
	}
	var release access
	if h.cluster != "" {
		release = p.ask(ctx, members.Access(a.GetUserInfo(), h.cluster, members.VerbRelease))
	}
	if msg := releaseRefusal(what, c, h, release, a.GetUserInfo().GetName()); msg != "" {
		return apierrors.NewForbidden(claimsResource, a.GetName(), errors.New(msg))
	}
	return nil
}

// ask asks the authorizer one question.
func (p *plugin) ask(ctx context.Context, q authorizer.AttributesRecord) access {
	d, reason, err := p.Authorizer().Authorize(ctx, q)
	if err != nil && d != authorizer.DecisionAllow {
		reason = strings.TrimPrefix(reason+"; "+err.Error(), "; ")
	}
	return access{allowed: d == authorizer.DecisionAllow, reason: reason}
}

func toClaim(obj runtime.Object) (*quotav1alpha1.ResourceClaim, error) {
	return typed[quotav1alpha1.ResourceClaim](obj, "ResourceClaim")
}

// typed is obj as a *T, served natively (typed) or as a CRD (unstructured).
func typed[T any](obj runtime.Object, kind string) (*T, error) {
	if obj == nil {
		return nil, nil
	}
	if c, ok := any(obj).(*T); ok { // served natively
		return c, nil
	}
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("a %s was expected, not %T", kind, obj))
	}
	c := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), c); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("reading the %s: %v", kind, err))
	}
	return c, nil
}
